//! Messages on DynamoDB: one item per message under `MSG#<org>#<id>`, with
//! `receivedAt` and a `ttl` one retention later; the old `ORG#<org>` /
//! `MSG#<id>` items are still read on a miss and dated by
//! [`DynamoStore::migrate_legacy_messages`] (see [`keys`](super::keys)).

use aws_sdk_dynamodb::types::AttributeValue;

use super::codec::{list, n, number, optional, optional_text, s, text, texts};
use super::keys::{key, legacy_msg_sk, message_pk, org_pk, MESSAGE_SK};
use super::{backend, DynamoStore, Item, MAX_PARTITION_KEY, MAX_SORT_KEY};
use crate::ids::OrgId;
use crate::model::Message;
use crate::store::StoreError;

impl DynamoStore {
    /// Puts the message under its own key, received at `received_at`
    /// (epoch ms), with its `ttl` one message retention later.
    pub(super) async fn put_message_item(
        &self,
        org_id: &OrgId,
        message: &Message,
        received_at: i64,
    ) -> Result<(), StoreError> {
        let pk = message_pk(org_id, &message.id);
        if pk.len() > MAX_PARTITION_KEY {
            return Err(StoreError::backend(format!(
                "message id of {} bytes is longer than a DynamoDB partition key allows",
                message.id.len()
            )));
        }
        let mut item = key(pk, MESSAGE_SK.into());
        item.insert("orgId".into(), s(org_id.to_string()));
        item.insert("id".into(), s(message.id.clone()));
        item.insert("owner".into(), optional(&message.owner));
        item.insert("time".into(), optional(&message.time));
        item.insert("direction".into(), s(message.direction.clone()));
        item.insert("to".into(), list(&message.to));
        item.insert("from".into(), s(message.from.clone()));
        item.insert("text".into(), s(message.text.clone()));
        item.insert("media".into(), list(&message.media));
        item.insert("attachments".into(), list(&message.attachments));
        item.insert("receivedAt".into(), n(received_at));
        item.insert("ttl".into(), self.message_ttl(received_at));
        self.client
            .put_item()
            .table_name(&self.tables.messages)
            .set_item(Some(item))
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// The message under its own key, else under its old key; absent when
    /// received before `received_since` (DynamoDB's TTL deletes late).
    pub(super) async fn message_item(
        &self,
        org_id: &OrgId,
        id: &str,
        received_since: i64,
    ) -> Result<Option<Message>, StoreError> {
        let pk = message_pk(org_id, id);
        if pk.len() > MAX_PARTITION_KEY {
            return Ok(None);
        }
        let found = match self.get_message_at(key(pk, MESSAGE_SK.into())).await? {
            Some(item) => Some(item),
            None => self.legacy_message_item(org_id, id).await?,
        };
        let Some(item) = found else {
            return Ok(None);
        };
        // An old-key message not yet migrated has no `receivedAt`: kept.
        if item.contains_key("receivedAt") && number(&item, "receivedAt")? < received_since {
            return Ok(None);
        }
        Ok(Some(Message {
            id: text(&item, "id")?,
            owner: optional_text(&item, "owner")?,
            time: optional_text(&item, "time")?,
            direction: text(&item, "direction")?,
            to: texts(&item, "to")?,
            from: text(&item, "from")?,
            text: text(&item, "text")?,
            media: texts(&item, "media")?,
            attachments: texts(&item, "attachments")?,
        }))
    }

    /// The message as stored under `ORG#<org>` before the per-id keys.
    async fn legacy_message_item(
        &self,
        org_id: &OrgId,
        id: &str,
    ) -> Result<Option<Item>, StoreError> {
        let sk = legacy_msg_sk(id);
        if sk.len() > MAX_SORT_KEY {
            return Ok(None); // it could not have been stored
        }
        self.get_message_at(key(org_pk(org_id), sk)).await
    }

    /// Strongly consistent: a client fetches the message right after the
    /// notification that the ingesting process sent.
    async fn get_message_at(&self, key: Item) -> Result<Option<Item>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.messages)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        Ok(output.item)
    }

    /// Epoch seconds one retention after `received_at`, saturating (a
    /// retention of centuries must not wrap into the past).
    fn message_ttl(&self, received_at: i64) -> AttributeValue {
        let retention = i64::try_from(self.message_retention.as_secs()).unwrap_or(i64::MAX);
        n((received_at / 1000).saturating_add(retention))
    }

    /// The upgrade to per-id keys, once: every message still under its old
    /// `ORG#<org>` key without a `ttl` gets `receivedAt` = `now` and the
    /// `ttl` of the message retention, so DynamoDB removes it one retention
    /// from now (its real receipt time was never stored). Reads the whole
    /// table (`Scan`); safe to run again and while the service runs.
    /// Returns how many messages it dated.
    pub async fn migrate_legacy_messages(&self, now: i64) -> Result<u64, StoreError> {
        let mut pages = self
            .client
            .scan()
            .table_name(&self.tables.messages)
            .filter_expression(
                "begins_with(#pk, :org) AND begins_with(#sk, :msg) AND attribute_not_exists(#ttl)",
            )
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_names("#sk", "sk")
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":org", s("ORG#".into()))
            .expression_attribute_values(":msg", s("MSG#".into()))
            .into_paginator()
            .items()
            .send();
        let mut dated = 0;
        while let Some(item) = pages.next().await {
            let item = item.map_err(backend)?;
            let key = key(text(&item, "pk")?, text(&item, "sk")?);
            let updated = self
                .client
                .update_item()
                .table_name(&self.tables.messages)
                .set_key(Some(key))
                .update_expression("SET #at = :at, #ttl = :ttl")
                .condition_expression("attribute_exists(#pk) AND attribute_not_exists(#ttl)")
                .expression_attribute_names("#at", "receivedAt")
                .expression_attribute_names("#ttl", "ttl")
                .expression_attribute_names("#pk", "pk")
                .expression_attribute_values(":at", n(now))
                .expression_attribute_values(":ttl", self.message_ttl(now))
                .send()
                .await;
            match updated {
                Ok(_) => dated += 1,
                // Dated meanwhile by another run, or deleted: nothing to do.
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|e| e.is_conditional_check_failed_exception()) => {}
                Err(e) => return Err(backend(e)),
            }
        }
        Ok(dated)
    }
}
