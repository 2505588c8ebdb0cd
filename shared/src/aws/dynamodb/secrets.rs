//! Signing-secret rotation on DynamoDB: the subscription item (at its
//! version) and its filter index copies change in one transaction, so a
//! fan-out never reads a secret the subscription no longer has.

use std::collections::HashSet;

use aws_sdk_dynamodb::types::{TransactWriteItem, Update};

use super::backoff::Backoff;
use super::codec::{n, previous_secrets, s};
use super::keys::{filter_pk, key, org_pk, sub_sk};
use super::write::{distinct, Transaction};
use super::{backend_build, DynamoStore, Item};
use crate::ids::{OrgId, SubscriptionId};
use crate::store::{PreviousSecret, SecretRotation, StoreError, StoredSubscription};

impl DynamoStore {
    pub(super) async fn rotate(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
        rotation: &SecretRotation,
    ) -> Result<Option<StoredSubscription>, StoreError> {
        let table = &self.tables.subscriptions;
        let mut backoff = Backoff::default();
        // Index entries already removed by TTL (expired subscriptions).
        let mut vanished: HashSet<String> = HashSet::new();
        loop {
            let Some((sub, version)) = self.versioned(org_id, id).await? else {
                return Ok(None);
            };
            let previous = rotation.previous_after(&sub)?;
            let rotated = StoredSubscription {
                secret: rotation.new_secret.clone(),
                previous_secrets: previous,
                updated_at: rotation.now,
                ..sub.clone()
            };
            let mut writes = vec![secret_update(
                table,
                key(org_pk(org_id), sub_sk(id)),
                &rotated,
                Some(version),
            )?];
            let copies: Vec<&String> = distinct(&sub.event_filters)
                .filter(|f| !vanished.contains(*f))
                .collect();
            for filter in &copies {
                writes.push(secret_update(
                    table,
                    key(filter_pk(filter), sub_sk(id)),
                    &rotated,
                    None,
                )?);
            }
            match self.transact(writes).await? {
                Transaction::Written => return Ok(Some(rotated)),
                Transaction::Cancelled(reasons) => {
                    let gone: Vec<&String> = copies
                        .iter()
                        .zip(reasons.iter().skip(1))
                        .filter(|(_, reason)| reason.condition_failed())
                        .map(|(filter, _)| *filter)
                        .collect();
                    let subscription_changed = reasons.first().is_none_or(|r| r.code != "None");
                    if gone.is_empty() || subscription_changed {
                        backoff.wait("rotate_secret").await?;
                    }
                    vanished.extend(gone.into_iter().cloned());
                }
            }
        }
    }
}

/// Sets the secrets and `updatedAt` of the subscription item (at `version`,
/// which is bumped) or of an index entry (if it still exists).
fn secret_update(
    table: &str,
    key: Item,
    sub: &StoredSubscription,
    version: Option<u64>,
) -> Result<TransactWriteItem, StoreError> {
    let previous: &[PreviousSecret] = &sub.previous_secrets;
    let mut set = vec![
        "#secret = :secret",
        "#previous = :previous",
        "#updated = :updated",
    ];
    let mut update = Update::builder()
        .table_name(table)
        .set_key(Some(key))
        .expression_attribute_names("#secret", "secret")
        .expression_attribute_names("#previous", "previousSecrets")
        .expression_attribute_names("#updated", "updatedAt")
        .expression_attribute_values(":secret", s(sub.secret.clone()))
        .expression_attribute_values(":previous", previous_secrets(previous))
        .expression_attribute_values(":updated", n(sub.updated_at));
    update = match version {
        Some(version) => {
            set.push("#v = :next");
            update
                .condition_expression("#v = :v")
                .expression_attribute_names("#v", "version")
                .expression_attribute_values(":v", n(version as i64))
                .expression_attribute_values(":next", n(version as i64 + 1))
        }
        None => update.condition_expression("attribute_exists(pk)"),
    };
    let update = update
        .update_expression(format!("SET {}", set.join(", ")))
        .build()
        .map_err(backend_build)?;
    Ok(TransactWriteItem::builder().update(update).build())
}
