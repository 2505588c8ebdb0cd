//! Conditional writes and transactions: create, versioned update, the
//! uniqueness guard, and the conditions they carry.

use std::collections::{HashMap, HashSet};

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    Delete, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};

use super::codec::{
    expiry_item, index_item, n, number, parse_subscription, s, subscription_item, text,
};
use super::keys::{created_sk, expiry_key, filter_pk, key, org_pk, sub_sk, uri_sk, COUNTER_SK};
use super::{backend, backend_build, DynamoStore, Item, MAX_SORT_KEY};
use crate::ids::{OrgId, SubscriptionId};
use crate::model::SubscriptionStatus;
use crate::store::{StoreError, StoredSubscription, Upsert};

impl DynamoStore {
    /// The subscription and its version, read strongly consistently.
    pub(super) async fn versioned(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
    ) -> Result<Option<(StoredSubscription, u64)>, StoreError> {
        let sk = sub_sk(id);
        if sk.len() > MAX_SORT_KEY {
            return Ok(None); // no id we make is that long
        }
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.subscriptions)
            .key("pk", s(org_pk(org_id)))
            .key("sk", s(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        output
            .item()
            .map(|item| Ok((parse_subscription(item)?, number(item, "version")? as u64)))
            .transpose()
    }

    pub(super) async fn guard(
        &self,
        org_id: &OrgId,
        uri: &str,
    ) -> Result<Option<SubscriptionId>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.subscriptions)
            .key("pk", s(org_pk(org_id)))
            .key("sk", s(uri_sk(uri)))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        output
            .item()
            .map(|item| text(item, "subscriptionId").map(SubscriptionId::from))
            .transpose()
    }

    /// Creates the subscription; `dangling` is the id a guard names whose
    /// subscription is gone, which the new guard may then replace.
    pub(super) async fn try_create(
        &self,
        u: &Upsert,
        dangling: Option<&str>,
    ) -> Result<Attempt<(StoredSubscription, bool)>, StoreError> {
        let sub = StoredSubscription {
            id: u.new_id.clone(),
            org_id: u.org_id.clone(),
            uri: u.uri.clone(),
            event_filters: u.event_filters.clone(),
            disabled_filters: u.disabled_filters.clone(),
            expires_at: u.expires_at,
            status: SubscriptionStatus::Active,
            created_at: u.now,
            updated_at: u.now,
            secret: u.new_secret.clone(),
            previous_secrets: Vec::new(),
            failing_since: None,
            health: Default::default(),
            ordered: u.ordered.unwrap_or(false),
            rate_limit: u.rate_limit.flatten(),
            role_arn: u.role_arn.clone(),
            external_id: u.external_id.clone(),
            payload_filter: u.payload_filter.clone().flatten(),
            retry_schedule: u.retry_schedule.clone().flatten(),
            custom_headers: u.custom_headers.clone().flatten(),
        };
        let table = &self.tables.subscriptions;
        let mut guard = key(org_pk(&u.org_id), uri_sk(&u.uri));
        guard.insert("subscriptionId".into(), s(sub.id.to_string()));
        guard.insert("uri".into(), s(sub.uri.clone()));
        let mut writes = vec![
            put(table, guard, Some(guard_condition(dangling)))?,
            TransactWriteItem::builder()
                .update(
                    Update::builder()
                        .table_name(table)
                        .set_key(Some(key(org_pk(&u.org_id), COUNTER_SK.into())))
                        .update_expression("SET #n = if_not_exists(#n, :zero) + :one")
                        .condition_expression("attribute_not_exists(#n) OR #n < :max")
                        .expression_attribute_names("#n", "n")
                        .expression_attribute_values(":zero", n(0))
                        .expression_attribute_values(":one", n(1))
                        .expression_attribute_values(":max", n(u.max_per_org as i64))
                        .return_values_on_condition_check_failure(
                            ReturnValuesOnConditionCheckFailure::AllOld,
                        )
                        .build()
                        .map_err(backend_build)?,
                )
                .build(),
            put(
                table,
                subscription_item(&sub, 1),
                Some(Condition::new("attribute_not_exists(pk)")),
            )?,
        ];
        writes.push(put(
            table,
            key(org_pk(&u.org_id), created_sk(sub.created_at, &sub.id)),
            None,
        )?);
        for filter in distinct(&sub.event_filters) {
            writes.push(put(table, index_item(&sub, filter), None)?);
        }
        writes.push(put(table, expiry_item(&sub), None)?);
        match self.transact(writes).await? {
            Transaction::Written => Ok(Attempt::Done((sub, true))),
            Transaction::Cancelled(reasons) => {
                if reasons.first().is_some_and(Reason::condition_failed) {
                    return Ok(Attempt::Retry); // created meanwhile: update it
                }
                match reasons.get(1) {
                    Some(counter) if counter.condition_failed() => {
                        let count = counter
                            .item
                            .as_ref()
                            .and_then(|item| number(item, "n").ok())
                            .map_or(u.max_per_org, |n| n.max(0) as usize);
                        Err(StoreError::LimitReached(count))
                    }
                    _ => Ok(Attempt::Retry),
                }
            }
        }
    }

    pub(super) async fn try_update(
        &self,
        u: &Upsert,
        id: &SubscriptionId,
    ) -> Result<Attempt<(StoredSubscription, bool)>, StoreError> {
        let Some((current, version)) = self.versioned(&u.org_id, id).await? else {
            // Deleted since the guard was read (or the guard dangles): create anew.
            return self.try_create(u, Some(id.as_str())).await;
        };
        let removed: Vec<&String> = current
            .event_filters
            .iter()
            .filter(|f| !u.event_filters.contains(f))
            .collect();
        let sub = StoredSubscription {
            event_filters: u.event_filters.clone(),
            disabled_filters: u.disabled_filters.clone(),
            expires_at: u.expires_at,
            status: SubscriptionStatus::Active,
            updated_at: u.now,
            failing_since: None,
            // Re-posting (after a successful handshake) closes the breaker;
            // a receiver's pause holds until the time it asked.
            health: crate::health::Health {
                rev: current.health.rev + 1,
                paused_until: current.health.paused(u.now),
                ..Default::default()
            },
            ordered: u.ordered.unwrap_or(current.ordered),
            rate_limit: u.rate_limit.unwrap_or(current.rate_limit),
            role_arn: u.role_arn.clone(),
            external_id: u.external_id.clone(),
            payload_filter: u
                .payload_filter
                .clone()
                .unwrap_or_else(|| current.payload_filter.clone()),
            retry_schedule: u
                .retry_schedule
                .clone()
                .unwrap_or_else(|| current.retry_schedule.clone()),
            custom_headers: u
                .custom_headers
                .clone()
                .unwrap_or_else(|| current.custom_headers.clone()),
            ..current.clone()
        };
        let table = &self.tables.subscriptions;
        let mut writes = vec![put(
            table,
            subscription_item(&sub, version + 1),
            Some(Condition::version(version)),
        )?];
        for filter in distinct(&sub.event_filters) {
            writes.push(put(table, index_item(&sub, filter), None)?);
        }
        for filter in removed {
            writes.push(delete(table, key(filter_pk(filter), sub_sk(id)), None)?);
        }
        if current.expires_at != sub.expires_at {
            writes.extend(expiry_moved(table, &current, &sub)?);
        }
        Ok(match self.transact(writes).await? {
            Transaction::Written => Attempt::Done((sub, false)),
            Transaction::Cancelled(_) => Attempt::Retry,
        })
    }

    pub(super) async fn transact(
        &self,
        writes: Vec<TransactWriteItem>,
    ) -> Result<Transaction, StoreError> {
        match self
            .client
            .transact_write_items()
            .set_transact_items(Some(writes))
            .send()
            .await
        {
            Ok(_) => Ok(Transaction::Written),
            Err(e) => match e.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => {
                    Ok(Transaction::Cancelled(
                        cancelled
                            .cancellation_reasons()
                            .iter()
                            .map(|r| Reason {
                                code: r.code().unwrap_or("None").to_owned(),
                                item: r.item().cloned(),
                            })
                            .collect(),
                    ))
                }
                Some(TransactWriteItemsError::TransactionInProgressException(_)) => {
                    Ok(Transaction::Cancelled(Vec::new()))
                }
                _ => Err(backend(e)),
            },
        }
    }
}

pub(super) enum Attempt<T> {
    Done(T),
    Retry,
}

pub(super) enum Transaction {
    Written,
    /// One reason per write, in order (empty when DynamoDB gave none).
    Cancelled(Vec<Reason>),
}

pub(super) struct Reason {
    pub(super) code: String,
    /// The item as it was, when a condition failed and it was asked for.
    pub(super) item: Option<Item>,
}

impl Reason {
    pub(super) fn condition_failed(&self) -> bool {
        self.code == "ConditionalCheckFailed"
    }
}

/// A new expiry: its entry replaces the old one, which re-arms the
/// reminder. (A re-post keeping the expiry leaves the entry, or its
/// absence once reminded, as it is.)
fn expiry_moved(
    table: &str,
    old: &StoredSubscription,
    new: &StoredSubscription,
) -> Result<Vec<TransactWriteItem>, StoreError> {
    let entry = expiry_item(new);
    let old_key = expiry_key(old.expires_at, &old.org_id, &old.id);
    let mut writes = Vec::with_capacity(2);
    // One transaction may not touch an item twice (expiries past 2286
    // share a key).
    if old_key.iter().any(|(k, v)| entry.get(k) != Some(v)) {
        writes.push(delete(table, old_key, None)?);
    }
    writes.push(put(table, entry, None)?);
    Ok(writes)
}

/// Each filter once: one transaction may not touch an item twice.
pub(super) fn distinct(filters: &[String]) -> impl Iterator<Item = &String> {
    let mut seen = HashSet::new();
    filters.iter().filter(move |f| seen.insert(f.as_str()))
}

/// The guard may be written if absent, or if it names `dangling`.
pub(super) fn guard_condition(dangling: Option<&str>) -> Condition {
    match dangling {
        None => Condition::new("attribute_not_exists(pk)"),
        Some(id) => Condition {
            expression: "attribute_not_exists(pk) OR #sid = :dangling".into(),
            names: HashMap::from([("#sid".to_owned(), "subscriptionId".to_owned())]),
            values: HashMap::from([(":dangling".to_owned(), s(id.to_owned()))]),
        },
    }
}

/// A condition expression with its placeholders.
pub(super) struct Condition {
    expression: String,
    names: HashMap<String, String>,
    values: Item,
}

impl Condition {
    pub(super) fn new(expression: &str) -> Self {
        Condition {
            expression: expression.into(),
            names: HashMap::new(),
            values: Item::new(),
        }
    }

    /// The item exists at exactly this version.
    pub(super) fn version(version: u64) -> Self {
        Condition {
            expression: "#v = :v".into(),
            names: HashMap::from([("#v".to_owned(), "version".to_owned())]),
            values: HashMap::from([(":v".to_owned(), n(version as i64))]),
        }
    }
}

pub(super) fn put(
    table: &str,
    item: Item,
    condition: Option<Condition>,
) -> Result<TransactWriteItem, StoreError> {
    let mut put = Put::builder().table_name(table).set_item(Some(item));
    if let Some(c) = condition {
        put = put
            .condition_expression(c.expression)
            .set_expression_attribute_names((!c.names.is_empty()).then_some(c.names))
            .set_expression_attribute_values((!c.values.is_empty()).then_some(c.values));
    }
    Ok(TransactWriteItem::builder()
        .put(put.build().map_err(backend_build)?)
        .build())
}

pub(super) fn delete(
    table: &str,
    key: Item,
    condition: Option<Condition>,
) -> Result<TransactWriteItem, StoreError> {
    let mut delete = Delete::builder().table_name(table).set_key(Some(key));
    if let Some(c) = condition {
        delete = delete
            .condition_expression(c.expression)
            .set_expression_attribute_names((!c.names.is_empty()).then_some(c.names))
            .set_expression_attribute_values((!c.values.is_empty()).then_some(c.values));
    }
    Ok(TransactWriteItem::builder()
        .delete(delete.build().map_err(backend_build)?)
        .build())
}
