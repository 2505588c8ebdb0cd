//! A change to a subscription that its filter-index copies must show at
//! once (its delivery state, its signing secrets), so a fan-out never reads
//! a state or secret the subscription no longer has: the item, at its
//! version, and every copy in one transaction. Copies TTL has already
//! removed (an expired subscription) are left out of the next try.

use std::collections::HashSet;

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};

use super::backoff::Backoff;
use super::codec::n;
use super::keys::{filter_pk, key, org_pk, sub_sk};
use super::write::{distinct, Transaction};
use super::{backend_build, DynamoStore, Item};
use crate::ids::{OrgId, SubscriptionId};
use crate::store::{StoreError, StoredSubscription};

/// What a change does to a subscription as read.
pub(super) enum Planned<T> {
    /// Nothing to write; the answer is `T`.
    Unchanged(T),
    /// Set these attributes (`None`: remove it); the answer is `T`.
    Set(T, Vec<(&'static str, Option<AttributeValue>)>),
}

impl DynamoStore {
    /// Reads the subscription, plans the change with `plan` and writes it
    /// everywhere; re-reads and plans again when the item changed meanwhile.
    /// `None` when the subscription does not exist.
    pub(super) async fn change_subscription<T>(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
        operation: &'static str,
        plan: impl Fn(&StoredSubscription) -> Result<Planned<T>, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let table = &self.tables.subscriptions;
        let mut backoff = Backoff::default();
        let mut vanished: HashSet<String> = HashSet::new();
        loop {
            let Some((sub, version)) = self.versioned(org_id, id).await? else {
                return Ok(None);
            };
            let (answer, fields) = match plan(&sub)? {
                Planned::Unchanged(answer) => return Ok(Some(answer)),
                Planned::Set(answer, fields) => (answer, fields),
            };
            let mut writes = vec![update(
                table,
                key(org_pk(org_id), sub_sk(id)),
                &fields,
                Some(version),
            )?];
            let copies: Vec<&String> = distinct(&sub.event_filters)
                .filter(|f| !vanished.contains(*f))
                .collect();
            for filter in &copies {
                writes.push(update(
                    table,
                    key(filter_pk(filter), sub_sk(id)),
                    &fields,
                    None,
                )?);
            }
            match self.transact(writes).await? {
                Transaction::Written => return Ok(Some(answer)),
                Transaction::Cancelled(reasons) => {
                    let gone: Vec<&String> = copies
                        .iter()
                        .zip(reasons.iter().skip(1))
                        .filter(|(_, reason)| reason.condition_failed())
                        .map(|(filter, _)| *filter)
                        .collect();
                    let subscription_changed = reasons.first().is_none_or(|r| r.code != "None");
                    if gone.is_empty() || subscription_changed {
                        backoff.wait(operation).await?;
                    }
                    vanished.extend(gone.into_iter().cloned());
                }
            }
        }
    }
}

/// Sets (or removes) `fields` of the subscription item, at `version`, which
/// is bumped, or of an index copy if it still exists.
fn update(
    table: &str,
    key: Item,
    fields: &[(&'static str, Option<AttributeValue>)],
    version: Option<u64>,
) -> Result<TransactWriteItem, StoreError> {
    let mut update = Update::builder().table_name(table).set_key(Some(key));
    let (mut set, mut remove) = (Vec::new(), Vec::new());
    for (i, (name, value)) in fields.iter().enumerate() {
        update = update.expression_attribute_names(format!("#f{i}"), *name);
        match value {
            Some(value) => {
                set.push(format!("#f{i} = :f{i}"));
                update = update.expression_attribute_values(format!(":f{i}"), value.clone());
            }
            None => remove.push(format!("#f{i}")),
        }
    }
    update = match version {
        Some(version) => {
            set.push("#v = :next".into());
            update
                .condition_expression("#v = :v")
                .expression_attribute_names("#v", "version")
                .expression_attribute_values(":v", n(version as i64))
                .expression_attribute_values(":next", n(version as i64 + 1))
        }
        None => update.condition_expression("attribute_exists(pk)"),
    };
    let mut expression = format!("SET {}", set.join(", "));
    if !remove.is_empty() {
        expression.push_str(&format!(" REMOVE {}", remove.join(", ")));
    }
    let update = update
        .update_expression(expression)
        .build()
        .map_err(backend_build)?;
    Ok(TransactWriteItem::builder().update(update).build())
}
