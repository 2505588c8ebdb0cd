//! The [`Store`] port on DynamoDB: each operation in terms of the keys,
//! items and transactions of its sibling modules.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{TransactWriteItem, Update};

use super::backoff::Backoff;
use super::change::Planned;
use super::codec::{health_json, n, parse_subscription, previous_secrets, s, HEALTH, HEALTH_REV};
use super::keys::{created_sk, expiry_key, filter_pk, key, org_pk, sub_sk, uri_sk, COUNTER_SK};
use super::write::{delete, distinct, Attempt, Condition, Transaction};
use super::{backend_build, DynamoStore};
use crate::health::rate::Reserved;
use crate::health::Health;
use crate::ids::{OrgId, SubscriptionId};
use crate::model::{Message, Page, SubscriptionStatus};
use crate::page::PageRequest;
use crate::store::{
    rules, DeliveryRecord, SecretRotation, Store, StoreError, StoredSubscription, Upsert,
};

#[async_trait]
impl Store for DynamoStore {
    async fn upsert_subscription(
        &self,
        upsert: Upsert,
    ) -> Result<(StoredSubscription, bool), StoreError> {
        let mut backoff = Backoff::default();
        loop {
            let attempt = match self.guard(&upsert.org_id, &upsert.uri).await? {
                Some(id) => self.try_update(&upsert, &id).await?,
                None => self.try_create(&upsert, None).await?,
            };
            match attempt {
                Attempt::Done(done) => return Ok(done),
                Attempt::Retry => backoff.wait("upsert").await?,
            }
        }
    }

    async fn get_subscription(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
    ) -> Result<Option<StoredSubscription>, StoreError> {
        Ok(self.versioned(org_id, id).await?.map(|(sub, _)| sub))
    }

    async fn list_subscriptions(
        &self,
        org_id: &OrgId,
        page: &PageRequest,
        now: i64,
    ) -> Result<Page<StoredSubscription>, StoreError> {
        self.list_page(org_id, page, now).await
    }

    async fn delete_subscription(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
    ) -> Result<bool, StoreError> {
        let table = &self.tables.subscriptions;
        let mut backoff = Backoff::default();
        loop {
            let Some((sub, version)) = self.versioned(org_id, id).await? else {
                return Ok(false);
            };
            let mut writes = vec![
                delete(
                    table,
                    key(org_pk(org_id), sub_sk(id)),
                    Some(Condition::version(version)),
                )?,
                delete(table, key(org_pk(org_id), uri_sk(&sub.uri)), None)?,
                delete(
                    table,
                    key(org_pk(org_id), created_sk(sub.created_at, id)),
                    None,
                )?,
                TransactWriteItem::builder()
                    .update(
                        Update::builder()
                            .table_name(table)
                            .set_key(Some(key(org_pk(org_id), COUNTER_SK.into())))
                            .update_expression("ADD #n :minus_one")
                            .expression_attribute_names("#n", "n")
                            .expression_attribute_values(":minus_one", n(-1))
                            .build()
                            .map_err(backend_build)?,
                    )
                    .build(),
            ];
            for filter in distinct(&sub.event_filters) {
                writes.push(delete(table, key(filter_pk(filter), sub_sk(id)), None)?);
            }
            writes.push(delete(table, expiry_key(sub.expires_at, org_id, id), None)?);
            match self.transact(writes).await? {
                Transaction::Written => return Ok(true),
                Transaction::Cancelled(_) => backoff.wait("delete").await?,
            }
        }
    }

    async fn subscriptions_for_filter(
        &self,
        filter: &str,
    ) -> Result<Vec<StoredSubscription>, StoreError> {
        self.query_all(&self.tables.subscriptions, filter_pk(filter), None)
            .await?
            .iter()
            .map(parse_subscription)
            .collect()
    }

    async fn record_delivery(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
        record: DeliveryRecord,
    ) -> Result<Option<SubscriptionStatus>, StoreError> {
        self.change_subscription(org_id, id, "record_delivery", |sub| {
            let (status, failing_since) =
                rules::after_delivery(sub.status, sub.failing_since, record);
            if (status, failing_since) == (sub.status, sub.failing_since) {
                return Ok(Planned::Unchanged(status));
            }
            Ok(Planned::Set(
                status,
                vec![
                    ("status", Some(s(status.as_str().into()))),
                    ("failingSince", failing_since.map(n)),
                ],
            ))
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
        // The subscription item only, one write unit, no transaction: the
        // index copies do not carry the breaker.
        let condition = match expected_rev {
            0 => "attribute_exists(pk) AND (attribute_not_exists(#r) OR #r = :old)",
            _ => "attribute_exists(pk) AND #r = :old",
        };
        let result = self
            .client()
            .update_item()
            .table_name(&self.tables().subscriptions)
            .key("pk", s(org_pk(org_id)))
            .key("sk", s(sub_sk(id)))
            .update_expression("SET #h = :h, #r = :new")
            .condition_expression(condition)
            .expression_attribute_names("#h", HEALTH)
            .expression_attribute_names("#r", HEALTH_REV)
            .expression_attribute_values(":h", s(health_json(new)))
            .expression_attribute_values(":new", n(new.rev as i64))
            .expression_attribute_values(":old", n(expected_rev as i64))
            .send()
            .await;
        super::conditional(result)
    }

    async fn reserve_rate_slot(
        &self,
        subscription: &SubscriptionId,
        limit: u32,
        now: i64,
        busy: bool,
    ) -> Result<Reserved, StoreError> {
        self.reserve_slot(subscription, limit, now, busy).await
    }

    async fn rotate_secret(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
        rotation: SecretRotation,
    ) -> Result<Option<StoredSubscription>, StoreError> {
        self.change_subscription(org_id, id, "rotate_secret", |sub| {
            let rotated = rotation.apply(sub)?;
            let fields = vec![
                ("secret", Some(s(rotated.secret.clone()))),
                (
                    "previousSecrets",
                    Some(previous_secrets(&rotated.previous_secrets)),
                ),
                ("updatedAt", Some(n(rotated.updated_at))),
            ];
            Ok(Planned::Set(rotated, fields))
        })
        .await
    }

    async fn put_message(
        &self,
        org_id: &OrgId,
        message: &Message,
        received_at: i64,
    ) -> Result<(), StoreError> {
        self.put_message_item(org_id, message, received_at).await
    }

    async fn get_message(
        &self,
        org_id: &OrgId,
        id: &str,
        received_since: i64,
    ) -> Result<Option<Message>, StoreError> {
        self.message_item(org_id, id, received_since).await
    }

    async fn purge_messages(&self, _before: i64) -> Result<u64, StoreError> {
        Ok(0) // DynamoDB's TTL removes expired messages by itself.
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
        // The entry is the reminder's "not sent yet": gone, it is sent.
        self.delete_expiry_entry(org_id, id, expires_at).await
    }
}
