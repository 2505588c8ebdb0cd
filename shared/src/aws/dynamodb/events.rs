//! Ingested event records, for the AWS outbox's deduplication: one item per
//! event in the messages table, keyed by the event's organization and id
//! (see [`keys`](super::keys)).

use aws_sdk_dynamodb::types::AttributeValue;

use super::keys::{event_pk, key, EVENT_SK};
use super::{backend, DynamoStore};
use crate::ids::OrgId;
use crate::store::StoreError;

impl DynamoStore {
    /// Whether the event was recorded (strongly consistent).
    pub async fn event_recorded(&self, org_id: &OrgId, event_id: &str) -> Result<bool, StoreError> {
        let seen = self
            .client
            .get_item()
            .table_name(&self.tables.messages)
            .set_key(Some(key(event_pk(org_id, event_id), EVENT_SK.into())))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        Ok(seen.item().is_some())
    }

    /// Records the event; DynamoDB removes the record at `expires_at_secs`.
    pub async fn record_event(
        &self,
        org_id: &OrgId,
        event_id: &str,
        expires_at_secs: i64,
    ) -> Result<(), StoreError> {
        let mut item = key(event_pk(org_id, event_id), EVENT_SK.into());
        item.insert("ttl".into(), AttributeValue::N(expires_at_secs.to_string()));
        self.client
            .put_item()
            .table_name(&self.tables.messages)
            .set_item(Some(item))
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }
}
