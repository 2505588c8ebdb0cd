//! The [`DeliveryHistory`] port on SQLite: a `notifications` row per
//! notification (written in the outbox's transaction) whose `attempt_log`
//! holds its attempts (a JSON array: one row write per attempt, no second
//! table). Outcomes are group-committed with queue completions: many
//! deliveries, one transaction.

use async_trait::async_trait;
use rusqlite::{params, params_from_iter, OptionalExtension, Row, Transaction};

use super::{failure, unreadable, SqliteDb, Write};
use crate::history::{
    AttemptRecord, Claim, DeliveryHistory, NotificationDetail, NotificationStatus,
    NotificationSummary, Outcome, StatsRow, Trigger, Window,
};
use crate::ids::{NotificationId, OrgId, SubscriptionId};
use crate::model::Page;
use crate::page::{Order, PageRequest};
use crate::queue::DeliveryJob;
use crate::store::StoreError;
use crate::telemetry::trace::TraceParent;

/// Writes the batch's outcomes in the group commit's transaction. A final
/// outcome (DELIVERED, FAILED) also takes the leased notification off the
/// queue, so the completion that follows finds nothing left to write: one
/// row write per delivery. (A resend queued meanwhile is not leased: it stays.)
pub(super) fn write_outcomes(tx: &Transaction<'_>, batch: &[Write]) -> rusqlite::Result<()> {
    let mut update = tx.prepare_cached(
        "UPDATE notifications SET status = ?2, next_attempt_at = ?3, \
         attempts = attempts + ?4, \
         last_attempt_at = coalesce(?5, last_attempt_at), \
         last_http_status = CASE WHEN ?4 = 1 THEN ?6 ELSE last_http_status END, \
         last_code = CASE WHEN ?4 = 1 THEN ?7 ELSE ?8 END, \
         attempt_log = CASE WHEN ?4 = 1 THEN json_insert(attempt_log, '$[#]', json(?9)) ELSE attempt_log END, \
         due_at = CASE WHEN ?2 <> 'PENDING' AND leased = 1 THEN NULL ELSE due_at END, \
         leased = CASE WHEN ?2 <> 'PENDING' THEN 0 ELSE leased END \
         WHERE id = ?1",
    )?;
    for write in batch {
        let Write::Outcome { id, outcome } = write else {
            continue;
        };
        let a = outcome.attempt.as_ref();
        let logged = a
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        update.execute(params![
            id,
            outcome.status.as_str(),
            outcome.next_attempt_at,
            i64::from(a.is_some()),
            a.map(|a| a.at),
            a.and_then(|a| a.http_status),
            a.and_then(|a| a.code.clone()),
            outcome.code,
            logged,
        ])?;
    }
    Ok(())
}

/// The attempts of notification `id`, from its `attempt_log` (column `column`).
fn attempt_log(
    id: &NotificationId,
    column: usize,
    json: &str,
) -> rusqlite::Result<Vec<AttemptRecord>> {
    serde_json::from_str(json).map_err(|e| unreadable(format!("notifications/{id}"), column, e))
}

/// The `status` (column `column`) of notification `id`.
fn status_of(
    id: &NotificationId,
    column: usize,
    status: &str,
) -> rusqlite::Result<NotificationStatus> {
    NotificationStatus::parse(status).ok_or_else(|| {
        unreadable(
            format!("notifications/{id}"),
            column,
            format!("unknown status '{status}'"),
        )
    })
}

const SUMMARY: &str = "id, subscription_id, event_id, event, created_at, status, attempts, \
                       last_attempt_at, next_attempt_at, last_http_status, last_code";

fn summary(row: &Row<'_>) -> rusqlite::Result<NotificationSummary> {
    let id: NotificationId = row.get(0)?;
    let status = status_of(&id, 5, &row.get::<_, String>(5)?)?;
    Ok(NotificationSummary {
        id,
        subscription_id: row.get(1)?,
        event_id: row.get(2)?,
        event: row.get(3)?,
        created_at: row.get(4)?,
        status,
        attempts: row.get(6)?,
        last_attempt_at: row.get(7)?,
        next_attempt_at: row.get(8)?,
        last_http_status: row.get(9)?,
        last_code: row.get(10)?,
    })
}

/// `WHERE` for a subscription's notifications in a window; parameters
/// ?1 org, ?2 subscription, ?3 since, ?4 until, then the statuses.
fn window_clause(window: &Window) -> String {
    let mut clause =
        "org_id = ?1 AND subscription_id = ?2 AND created_at >= ?3 AND created_at < ?4".to_owned();
    if !window.statuses.is_empty() {
        let marks: Vec<String> = (0..window.statuses.len())
            .map(|i| format!("?{}", i + 5))
            .collect();
        clause.push_str(&format!(" AND status IN ({})", marks.join(", ")));
    }
    clause
}

fn window_params(
    org_id: &OrgId,
    subscription_id: &SubscriptionId,
    window: &Window,
) -> Vec<rusqlite::types::Value> {
    use rusqlite::types::Value;
    let mut values = vec![
        Value::Text(org_id.to_string()),
        Value::Text(subscription_id.to_string()),
        Value::Integer(window.since),
        Value::Integer(window.until),
    ];
    values.extend(
        window
            .statuses
            .iter()
            .map(|s| Value::Text(s.as_str().to_owned())),
    );
    values
}

/// `ORDER BY` for the API's sort properties (newest first by default).
fn order_by(sort: &[Order]) -> String {
    let mut terms: Vec<String> = sort
        .iter()
        .map(|o| {
            let column = match o.property {
                "status" => "status",
                "attempts" => "attempts",
                "lastAttemptTime" => "last_attempt_at",
                "nextAttemptTime" => "next_attempt_at",
                _ => "created_at",
            };
            format!("{column} {}", if o.ascending { "ASC" } else { "DESC" })
        })
        .collect();
    terms.push("created_at DESC".into());
    terms.push("id DESC".into());
    terms.join(", ")
}

#[async_trait]
impl DeliveryHistory for SqliteDb {
    async fn record_enqueued(
        &self,
        event_id: &str,
        jobs: &[DeliveryJob],
    ) -> Result<(), StoreError> {
        // The history is the queue here: recording is queueing (the outbox
        // does both in its transaction).
        let (event_id, jobs) = (event_id.to_owned(), jobs.to_vec());
        let events = super::queue::events_of(&jobs);
        let now = self.now_ms();
        self.with(move |conn| {
            let tx = conn.transaction().map_err(failure)?;
            super::queue::insert_jobs(&tx, &event_id, &jobs, &events, now)?;
            tx.commit().map_err(failure)
        })
        .await
    }

    async fn record_outcome(&self, job: &DeliveryJob, outcome: &Outcome) -> Result<(), StoreError> {
        self.commit_write(Write::Outcome {
            id: job.id.clone(),
            outcome: outcome.clone(),
        })
        .await
        .map(drop)
    }

    async fn list(
        &self,
        org_id: &OrgId,
        subscription_id: &SubscriptionId,
        window: &Window,
        page: &PageRequest,
    ) -> Result<Page<NotificationSummary>, StoreError> {
        let clause = window_clause(window);
        let values = window_params(org_id, subscription_id, window);
        let (size, offset) = (page.size as i64, page.offset().min(i64::MAX as u64) as i64);
        let order = order_by(&page.sort);
        let request = page.clone();
        self.read(move |conn| {
            let total: u64 = conn
                .query_row(
                    &format!("SELECT count(*) FROM notifications WHERE {clause}"),
                    params_from_iter(values.iter()),
                    |r| r.get(0),
                )
                .map_err(failure)?;
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {SUMMARY} FROM notifications WHERE {clause} ORDER BY {order} LIMIT {size} OFFSET {offset}"
                ))
                .map_err(failure)?;
            let content = stmt
                .query_map(params_from_iter(values.iter()), summary)
                .map_err(failure)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(failure)?;
            Ok(request.page_of(content, total))
        })
        .await
    }

    async fn get(
        &self,
        org_id: &OrgId,
        subscription_id: &SubscriptionId,
        id: &NotificationId,
    ) -> Result<Option<NotificationDetail>, StoreError> {
        let (org_id, subscription_id, id) = (org_id.clone(), subscription_id.clone(), id.clone());
        self.read(move |conn| {
            let found = conn
                .query_row(
                    &format!(
                        "SELECT {SUMMARY}, body, attempt_log, traceparent FROM notifications \
                         WHERE id = ?1 AND org_id = ?2 AND subscription_id = ?3"
                    ),
                    params![id, org_id, subscription_id],
                    |r| {
                        Ok((
                            summary(r)?,
                            r.get::<_, String>(11)?,
                            r.get::<_, String>(12)?,
                            r.get::<_, Option<String>>(13)?,
                        ))
                    },
                )
                .optional()
                .map_err(failure)?;
            let Some((summary, payload, log, traceparent)) = found else {
                return Ok(None);
            };
            let attempts = attempt_log(&summary.id, 12, &log).map_err(failure)?;
            let trace_id = traceparent.as_deref().and_then(TraceParent::parse);
            Ok(Some(NotificationDetail {
                summary,
                payload,
                attempts,
                trace_id: trace_id.map(|t| t.trace_id_hex()),
            }))
        })
        .await
    }

    async fn stats_rows(
        &self,
        org_id: &OrgId,
        subscription_id: &SubscriptionId,
        since: i64,
        until: i64,
    ) -> Result<Vec<StatsRow>, StoreError> {
        let (org_id, subscription_id) = (org_id.clone(), subscription_id.clone());
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT created_at, status, attempts, attempt_log, id FROM notifications \
                     WHERE org_id = ?1 AND subscription_id = ?2 AND created_at >= ?3 AND created_at < ?4",
                )
                .map_err(failure)?;
            let rows = stmt
                .query_map(params![org_id, subscription_id, since, until], |r| {
                    let id: NotificationId = r.get(4)?;
                    let log: String = r.get(3)?;
                    Ok(StatsRow {
                        created_at: r.get(0)?,
                        status: status_of(&id, 1, &r.get::<_, String>(1)?)?,
                        attempts: r.get(2)?,
                        durations_ms: attempt_log(&id, 3, &log)?
                            .iter()
                            .map(|a| a.duration_ms)
                            .collect(),
                    })
                })
                .map_err(failure)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(failure)
        })
        .await
    }

    async fn claims(
        &self,
        org_id: &OrgId,
        subscription_id: &SubscriptionId,
        window: &Window,
        max: usize,
    ) -> Result<Vec<Claim>, StoreError> {
        let clause = window_clause(window);
        let values = window_params(org_id, subscription_id, window);
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT id, org_id, subscription_id, body, created_at, status, attempts \
                     FROM notifications WHERE {clause} ORDER BY created_at, id LIMIT {max}"
                ))
                .map_err(failure)?;
            let rows = stmt
                .query_map(params_from_iter(values.iter()), |r| {
                    let id: NotificationId = r.get(0)?;
                    let status = status_of(&id, 5, &r.get::<_, String>(5)?)?;
                    Ok(Claim {
                        job: DeliveryJob {
                            id,
                            org_id: r.get(1)?,
                            subscription_id: r.get(2)?,
                            body: r.get(3)?,
                            created_at: r.get(4)?,
                            trigger: Trigger::Manual,
                            attempts: 0,
                            not_before: None,
                            traceparent: None,
                            ordered: false,
                            history_attempts: 0,
                        },
                        status,
                        attempts: r.get(6)?,
                    })
                })
                .map_err(failure)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(failure)
        })
        .await
    }

    async fn mark_pending(&self, claims: &[Claim], now: i64) -> Result<usize, StoreError> {
        let marks: Vec<(NotificationId, &'static str, u32)> = claims
            .iter()
            .map(|c| (c.job.id.clone(), c.status.as_str(), c.attempts))
            .collect();
        self.with(move |conn| {
            let tx = conn.transaction().map_err(failure)?;
            let mut changed = 0;
            {
                let mut stmt = tx
                    .prepare_cached(
                        "UPDATE notifications SET status = 'PENDING', next_attempt_at = ?4 \
                         WHERE id = ?1 AND status = ?2 AND attempts = ?3",
                    )
                    .map_err(failure)?;
                for (id, status, attempts) in &marks {
                    changed += stmt
                        .execute(params![id, status, attempts, now])
                        .map_err(failure)?;
                }
            }
            tx.commit().map_err(failure)?;
            Ok(changed)
        })
        .await
    }

    async fn purge(&self, before: i64) -> Result<u64, StoreError> {
        self.with(move |conn| {
            // Not while queued: a notification still to deliver stays.
            let n = conn
                .execute(
                    "DELETE FROM notifications WHERE created_at < ?1 AND due_at IS NULL",
                    [before],
                )
                .map_err(failure)?;
            Ok(n as u64)
        })
        .await
    }
}
