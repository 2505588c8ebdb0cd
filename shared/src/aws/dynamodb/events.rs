//! Ingested event records, for the AWS outbox's deduplication: kept in the
//! messages table under the event's organization (see [`keys`](super::keys)).

use aws_sdk_dynamodb::types::AttributeValue;

use super::keys::{event_sk, key, org_pk};
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
            .set_key(Some(key(org_pk(org_id), event_sk(event_id))))
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
        let mut item = key(org_pk(org_id), event_sk(event_id));
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
