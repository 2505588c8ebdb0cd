//! The [`Store`] port on SQLite: subscriptions, their filter index, messages.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, Row, TransactionBehavior};

use super::{failure, unreadable, SqliteDb};
use crate::custom_headers::CustomHeaders;
use crate::health::rate::Reserved;
use crate::health::Health;
use crate::ids::{OrgId, SubscriptionId};
use crate::model::{Message, Page, SubscriptionStatus};
use crate::page::PageRequest;
use crate::payload_filter::PayloadFilter;
use crate::retry_schedule::RetrySchedule;
use crate::store::{
    order, rules, DeliveryRecord, DisabledEntry, PreviousSecret, SecretRotation, Store, StoreError,
    StoredSubscription, Upsert,
};

pub(super) const COLUMNS: &str =
    "id, org_id, uri, event_filters, disabled_filters, expires_at, status, created_at, updated_at, secret, failing_since, previous_secrets, health, health_rev, ordered, rate_limit, role_arn, external_id, payload_filter, retry_schedule, custom_headers";

pub(super) fn row_to_subscription(row: &Row<'_>) -> rusqlite::Result<StoredSubscription> {
    let id: SubscriptionId = row.get(0)?;
    let bad = |column: usize, problem: &dyn std::fmt::Display| {
        unreadable(format!("subscriptions/{id}"), column, problem)
    };
    // Borrowed from SQLite's row, not copied into Strings: they are only parsed.
    let text = |i: usize| row.get_ref(i)?.as_str().map_err(|e| bad(i, &e));
    let (filters, disabled) = (text(3)?, text(4)?);
    let (status, previous) = (text(6)?, text(11)?);
    Ok(StoredSubscription {
        org_id: row.get(1)?,
        uri: row.get(2)?,
        event_filters: serde_json::from_str(filters).map_err(|e| bad(3, &e))?,
        disabled_filters: serde_json::from_str::<Vec<DisabledEntry>>(disabled)
            .map_err(|e| bad(4, &e))?,
        expires_at: row.get(5)?,
        status: SubscriptionStatus::parse(status)
            .ok_or_else(|| bad(6, &format!("unknown status '{status}'")))?,
        created_at: row.get(7)?,
        updated_at: row.get(8)?,
        secret: row.get(9)?,
        failing_since: row.get(10)?,
        previous_secrets: serde_json::from_str::<Vec<PreviousSecret>>(previous)
            .map_err(|e| bad(11, &e))?,
        // The column is the revision: a re-post clears the JSON (all but a
        // receiver's pause still holding) and bumps it.
        health: Health {
            rev: row.get::<_, i64>(13)? as u64,
            ..match row.get::<_, Option<String>>(12)? {
                Some(health) => serde_json::from_str(&health).map_err(|e| bad(12, &e))?,
                None => Health::default(),
            }
        },
        ordered: row.get(14)?,
        rate_limit: row.get(15)?,
        role_arn: row.get(16)?,
        external_id: row.get(17)?,
        payload_filter: match row.get_ref(18)?.as_str_or_null().map_err(|e| bad(18, &e))? {
            Some(json) => Some(PayloadFilter::from_stored(json).map_err(|e| bad(18, &e))?),
            None => None,
        },
        retry_schedule: match row.get_ref(19)?.as_str_or_null().map_err(|e| bad(19, &e))? {
            Some(text) => Some(RetrySchedule::from_stored(text).map_err(|e| bad(19, &e))?),
            None => None,
        },
        custom_headers: match row.get_ref(20)?.as_str_or_null().map_err(|e| bad(20, &e))? {
            Some(json) => Some(CustomHeaders::from_stored(json).map_err(|e| bad(20, &e))?),
            None => None,
        },
        id,
    })
}

#[async_trait]
impl Store for SqliteDb {
    async fn upsert_subscription(
        &self,
        u: Upsert,
    ) -> Result<(StoredSubscription, bool), StoreError> {
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(failure)?;
            let existing: Option<String> = tx
                .query_row(
                    "SELECT id FROM subscriptions WHERE org_id = ?1 AND uri = ?2",
                    params![u.org_id, u.uri],
                    |r| r.get(0),
                )
                .optional()
                .map_err(failure)?;
            let filters = serde_json::to_string(&u.event_filters).map_err(failure)?;
            let disabled = serde_json::to_string(&u.disabled_filters).map_err(failure)?;
            let created = existing.is_none();
            let payload_filter = u.payload_filter.as_ref().map(|f| f.as_ref().map(PayloadFilter::json));
            let retry_schedule = u.retry_schedule.as_ref().map(|r| r.as_ref().map(RetrySchedule::stored));
            let custom_headers = u.custom_headers.as_ref().map(|h| h.as_ref().map(CustomHeaders::json));
            let id = match existing {
                Some(id) => {
                    tx.execute(
                        "UPDATE subscriptions SET event_filters = ?2, disabled_filters = ?3, \
                         expires_at = ?4, status = 'ACTIVE', updated_at = ?5, failing_since = NULL, \
                         health = CASE WHEN CAST(json_extract(health, '$.pausedUntil') AS INTEGER) > ?5 \
                           THEN json_object('pausedUntil', json_extract(health, '$.pausedUntil')) END, \
                         health_rev = health_rev + 1, \
                         expiry_reminded_for = CASE WHEN expires_at = ?4 THEN expiry_reminded_for END, \
                         rate_limit = CASE WHEN ?6 THEN ?7 ELSE rate_limit END, \
                         ordered = COALESCE(?8, ordered), role_arn = ?9, external_id = ?10, \
                         payload_filter = CASE WHEN ?11 THEN ?12 ELSE payload_filter END, \
                         retry_schedule = CASE WHEN ?13 THEN ?14 ELSE retry_schedule END, \
                         custom_headers = CASE WHEN ?15 THEN ?16 ELSE custom_headers END \
                         WHERE id = ?1",
                        params![id, filters, disabled, u.expires_at, u.now, u.rate_limit.is_some(), u.rate_limit.flatten(), u.ordered, u.role_arn, u.external_id, payload_filter.is_some(), payload_filter.flatten(), retry_schedule.is_some(), retry_schedule.flatten(), custom_headers.is_some(), custom_headers.flatten()],
                    )
                    .map_err(failure)?;
                    tx.execute("DELETE FROM subscription_filters WHERE subscription_id = ?1", [&id])
                        .map_err(failure)?;
                    id
                }
                None => {
                    let count: usize = tx
                        .query_row("SELECT n FROM subscription_counts WHERE org_id = ?1", [&u.org_id], |r| r.get(0))
                        .optional()
                        .map_err(failure)?
                        .unwrap_or(0);
                    if count >= u.max_per_org {
                        return Err(StoreError::LimitReached(count));
                    }
                    tx.execute(
                        "INSERT INTO subscriptions (id, org_id, uri, event_filters, disabled_filters, \
                         expires_at, status, created_at, updated_at, secret, rate_limit, ordered, role_arn, external_id, payload_filter, retry_schedule, custom_headers) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'ACTIVE', ?7, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
                        params![u.new_id, u.org_id, u.uri, filters, disabled, u.expires_at, u.now, u.new_secret, u.rate_limit.flatten(), u.ordered.unwrap_or(false), u.role_arn, u.external_id, payload_filter.flatten(), retry_schedule.flatten(), custom_headers.flatten()],
                    )
                    .map_err(failure)?;
                    u.new_id.to_string()
                }
            };
            for filter in &u.event_filters {
                tx.execute(
                    "INSERT INTO subscription_filters (filter, subscription_id) VALUES (?1, ?2)",
                    params![crate::filter::index_key(filter), id],
                )
                .map_err(failure)?;
            }
            let stored = tx
                .query_row(&format!("SELECT {COLUMNS} FROM subscriptions WHERE id = ?1"), [&id], row_to_subscription)
                .map_err(failure)?;
            tx.commit().map_err(failure)?;
            Ok((stored, created))
        })
        .await
    }

    async fn get_subscription(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
    ) -> Result<Option<StoredSubscription>, StoreError> {
        if let Some(found) = self.reads.get(org_id, id) {
            return Ok(Some(found));
        }
        let generation = self.reads.generation();
        let (org, key) = (org_id.to_owned(), id.to_owned());
        let found = self
            .read(move |conn| {
                conn.prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM subscriptions WHERE id = ?1 AND org_id = ?2"
                ))
                .and_then(|mut s| {
                    s.query_row(params![key, org], row_to_subscription)
                        .optional()
                })
                .map_err(failure)
            })
            .await?;
        if let Some(found) = &found {
            self.reads.insert(found, generation);
        }
        Ok(found)
    }

    async fn list_subscriptions(
        &self,
        org_id: &OrgId,
        page: &PageRequest,
        now: i64,
    ) -> Result<Page<StoredSubscription>, StoreError> {
        // A page in a stored order is the same at any time until a write;
        // one sorted by a rule of the core may change with `now`.
        let columns = order::column_order(page);
        let kept = columns.is_some();
        if let Some(found) = kept.then(|| self.reads.page(org_id, page)).flatten() {
            return Ok(found);
        }
        let generation = self.reads.generation();
        let (org, request) = (org_id.to_owned(), page.clone());
        let listed = self
            .read(move |conn| list_page(conn, &org, &request, columns.as_deref(), now))
            .await?;
        if kept {
            self.reads.insert_page(org_id, page, &listed, generation);
        }
        Ok(listed)
    }

    async fn delete_subscription(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
    ) -> Result<bool, StoreError> {
        let (org_id, id) = (org_id.to_owned(), id.to_owned());
        self.with(move |conn| {
            // Filter index rows go with it (ON DELETE CASCADE).
            let n = conn
                .execute(
                    "DELETE FROM subscriptions WHERE id = ?1 AND org_id = ?2",
                    params![id, org_id],
                )
                .map_err(failure)?;
            Ok(n > 0)
        })
        .await
    }

    async fn subscriptions_for_filter(
        &self,
        filter: &str,
    ) -> Result<Vec<StoredSubscription>, StoreError> {
        let filter = filter.to_owned();
        self.read(move |conn| {
            let cols = COLUMNS.split(", ").map(|c| format!("s.{c}")).collect::<Vec<_>>().join(", ");
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {cols} FROM subscription_filters f JOIN subscriptions s ON s.id = f.subscription_id \
                     WHERE f.filter = ?1"
                ))
                .map_err(failure)?;
            let rows = stmt.query_map([filter], row_to_subscription).map_err(failure)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(failure)
        })
        .await
    }

    async fn record_delivery(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
        record: DeliveryRecord,
    ) -> Result<Option<SubscriptionStatus>, StoreError> {
        let (org_id, id) = (org_id.to_owned(), id.to_owned());
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(failure)?;
            let current = tx
                .prepare_cached(
                    "SELECT status, failing_since FROM subscriptions WHERE id = ?1 AND org_id = ?2",
                )
                .and_then(|mut s| {
                    s.query_row(params![id, org_id], |r| {
                        let status = r.get_ref(0)?.as_str()?;
                        let status = SubscriptionStatus::parse(status).ok_or_else(|| {
                            unreadable(format!("subscriptions/{id}"), 0, format!("unknown status '{status}'"))
                        })?;
                        Ok((status, r.get::<_, Option<i64>>(1)?))
                    })
                    .optional()
                })
                .map_err(failure)?;
            let Some(current) = current else {
                return Ok(None);
            };
            let next = rules::after_delivery(current.0, current.1, record);
            if next != current {
                tx.prepare_cached(
                    "UPDATE subscriptions SET status = ?3, failing_since = ?4 WHERE id = ?1 AND org_id = ?2",
                )
                .and_then(|mut s| s.execute(params![id, org_id, next.0.as_str(), next.1]))
                .map_err(failure)?;
            }
            tx.commit().map_err(failure)?;
            Ok(Some(next.0))
        })
        .await
    }

    async fn update_health(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
        expected_rev: u64,
        new: &Health,
    ) -> Result<bool, StoreError> {
        let (org_id, id) = (org_id.to_owned(), id.to_owned());
        let json = serde_json::to_string(new).map_err(failure)?;
        let (expected, rev) = (expected_rev as i64, new.rev as i64);
        self.with(move |conn| {
            let changed = conn
                .prepare_cached(
                    "UPDATE subscriptions SET health = ?3, health_rev = ?5 \
                     WHERE id = ?1 AND org_id = ?2 AND health_rev = ?4",
                )
                .and_then(|mut s| s.execute(params![id, org_id, json, expected, rev]))
                .map_err(failure)?;
            Ok(changed == 1)
        })
        .await
    }

    async fn reserve_rate_slot(
        &self,
        subscription: &SubscriptionId,
        limit: u32,
        now: i64,
        _busy: bool,
    ) -> Result<Reserved, StoreError> {
        // The lease's own slots (one process owns the file): what the lease
        // took counts here, and the other way round.
        let mut rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        let pace = rates.entry(subscription.to_string()).or_default();
        Ok(pace.reserve(limit, now))
    }

    async fn rotate_secret(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
        rotation: SecretRotation,
    ) -> Result<Option<StoredSubscription>, StoreError> {
        let (org_id, id) = (org_id.to_owned(), id.to_owned());
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(failure)?;
            let select =
                format!("SELECT {COLUMNS} FROM subscriptions WHERE id = ?1 AND org_id = ?2");
            let Some(current) = tx
                .query_row(&select, params![id, org_id], row_to_subscription)
                .optional()
                .map_err(failure)?
            else {
                return Ok(None);
            };
            let rotated = rotation.apply(&current)?;
            let previous = serde_json::to_string(&rotated.previous_secrets).map_err(failure)?;
            tx.execute(
                "UPDATE subscriptions SET secret = ?3, previous_secrets = ?4, updated_at = ?5 \
                 WHERE id = ?1 AND org_id = ?2",
                params![id, org_id, rotated.secret, previous, rotated.updated_at],
            )
            .map_err(failure)?;
            tx.commit().map_err(failure)?;
            Ok(Some(rotated))
        })
        .await
    }

    async fn put_message(
        &self,
        org_id: &OrgId,
        message: &Message,
        received_at: i64,
    ) -> Result<(), StoreError> {
        let org_id = org_id.to_owned();
        let id = message.id.clone();
        let body = serde_json::to_string(message).map_err(failure)?;
        self.with(move |conn| {
            conn.prepare_cached(UPSERT_MESSAGE)
                .and_then(|mut s| s.execute(params![org_id, id, body, received_at]))
                .map_err(failure)?;
            Ok(())
        })
        .await
    }

    async fn get_message(
        &self,
        org_id: &OrgId,
        id: &str,
        received_since: i64,
    ) -> Result<Option<Message>, StoreError> {
        let (org_id, id) = (org_id.to_owned(), id.to_owned());
        self.read(move |conn| {
            let body: Option<String> = conn
                .prepare_cached(
                    "SELECT body FROM messages WHERE org_id = ?1 AND id = ?2 AND received_at >= ?3",
                )
                .and_then(|mut s| {
                    s.query_row(params![org_id, id, received_since], |r| r.get(0))
                        .optional()
                })
                .map_err(failure)?;
            body.map(|b| serde_json::from_str(&b).map_err(failure))
                .transpose()
        })
        .await
    }

    async fn purge_messages(&self, before: i64) -> Result<u64, StoreError> {
        self.with(move |conn| {
            let n = conn
                .execute("DELETE FROM messages WHERE received_at < ?1", [before])
                .map_err(failure)?;
            Ok(n as u64)
        })
        .await
    }

    async fn expiring_subscriptions(
        &self,
        after: i64,
        until: i64,
        limit: usize,
    ) -> Result<Vec<StoredSubscription>, StoreError> {
        self.expiring(after, until, limit).await
    }

    async fn mark_expiry_reminded(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        self.mark_reminded(org_id, id, expires_at).await
    }
}

/// One page and the organization's total, read in one transaction so they
/// agree. An order of stored columns is SQLite's (an index range where
/// there is one); an order that needs a rule of the core (the status as
/// seen at `now`, `ignorecase`) is the core's ([`order::sort_and_page_by`])
/// over the sort keys of the organization, then the page's rows by id.
/// `columns`: the page's order as stored columns ([`order::column_order`]),
/// if it is one.
fn list_page(
    conn: &rusqlite::Connection,
    org_id: &OrgId,
    page: &PageRequest,
    columns: Option<&[(order::Column, bool)]>,
    now: i64,
) -> Result<Page<StoredSubscription>, StoreError> {
    let tx = conn.unchecked_transaction().map_err(failure)?;
    let listed = match columns {
        Some(columns) => in_column_order(&tx, org_id, page, columns),
        None => in_core_order(&tx, org_id, page, now),
    }?;
    tx.finish().map_err(failure)?;
    Ok(listed)
}

/// A page in an order of stored columns, sorted and cut by SQLite: in
/// creation order a range of the index `(org_id, created_at, id)` (or its
/// descending twin), by uri one of the unique `(org_id, uri)`.
fn in_column_order(
    tx: &rusqlite::Transaction<'_>,
    org_id: &OrgId,
    page: &PageRequest,
    columns: &[(order::Column, bool)],
) -> Result<Page<StoredSubscription>, StoreError> {
    let total: u64 = tx
        .prepare_cached("SELECT n FROM subscription_counts WHERE org_id = ?1")
        .and_then(|mut s| s.query_row([&org_id], |r| r.get(0)).optional())
        .map_err(failure)?
        .unwrap_or(0);
    if page.offset() >= total {
        return Ok(page.page_of(Vec::new(), total)); // past the end: no query
    }
    let order_by = columns
        .iter()
        .map(|&(column, ascending)| {
            let name = match column {
                order::Column::Id => "id",
                order::Column::Uri => "uri",
                order::Column::CreatedAt => "created_at",
                order::Column::UpdatedAt => "updated_at",
                order::Column::ExpiresAt => "expires_at",
            };
            format!("{name} {}", if ascending { "ASC" } else { "DESC" })
        })
        .collect::<Vec<_>>()
        .join(", ");
    // `CAST(?2 …)`, not a bare `?2`: SQLite plans with a bare LIMIT or OFFSET
    // parameter's value, so every execution re-prepared the statement (a
    // fifth of a page's instructions; as the queue's lease in queue.rs).
    let sql = format!(
        "SELECT {COLUMNS} FROM subscriptions WHERE org_id = ?1 ORDER BY {order_by} \
         LIMIT CAST(?2 AS INTEGER) OFFSET CAST(?3 AS INTEGER)"
    );
    let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let mut stmt = tx.prepare_cached(&sql).map_err(failure)?;
    let content = stmt
        .query_map(
            params![org_id, clamp(page.size), clamp(page.offset())],
            row_to_subscription,
        )
        .map_err(failure)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(failure)?;
    Ok(page.page_of(content, total))
}

/// The stored values an order compares, of one subscription.
struct Sortable {
    id: SubscriptionId,
    uri: String,
    status: SubscriptionStatus,
    expires_at: i64,
    created_at: i64,
    updated_at: i64,
}

impl Sortable {
    fn keys(&self) -> order::SortKeys<'_> {
        order::SortKeys {
            id: self.id.as_str(),
            uri: &self.uri,
            status: self.status,
            expires_at: self.expires_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// Any order but creation order: the organization's sort keys sorted by
/// the core, then the page's subscriptions by id.
fn in_core_order(
    tx: &rusqlite::Transaction<'_>,
    org_id: &OrgId,
    page: &PageRequest,
    now: i64,
) -> Result<Page<StoredSubscription>, StoreError> {
    let all = tx
        .prepare_cached(
            "SELECT id, uri, status, expires_at, created_at, updated_at \
             FROM subscriptions WHERE org_id = ?1",
        )
        .and_then(|mut s| {
            s.query_map([org_id], |row| {
                let id: SubscriptionId = row.get(0)?;
                let status = row.get_ref(2)?.as_str()?;
                Ok(Sortable {
                    status: SubscriptionStatus::parse(status).ok_or_else(|| {
                        unreadable(
                            format!("subscriptions/{id}"),
                            2,
                            format!("unknown status '{status}'"),
                        )
                    })?,
                    id,
                    uri: row.get(1)?,
                    expires_at: row.get(3)?,
                    created_at: row.get(4)?,
                    updated_at: row.get(5)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()
        })
        .map_err(failure)?;
    let sorted = order::sort_and_page_by(all, page, now, Sortable::keys);
    let mut get = tx
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM subscriptions WHERE id = ?1"
        ))
        .map_err(failure)?;
    let content = sorted
        .content
        .iter()
        .map(|s| get.query_row([&s.id], row_to_subscription))
        .collect::<Result<Vec<_>, _>>()
        .map_err(failure)?;
    Ok(page.page_of(content, sorted.total_elements))
}

/// Stores a message, or replaces it and its receipt time (the outbox too).
pub(super) const UPSERT_MESSAGE: &str = "INSERT INTO messages (org_id, id, body, received_at) \
     VALUES (?1, ?2, ?3, ?4) \
     ON CONFLICT (org_id, id) DO UPDATE SET body = excluded.body, received_at = excluded.received_at";
