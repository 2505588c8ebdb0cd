//! Ingested event records, for the AWS outbox's deduplication: one item per
//! event in the messages table, keyed by the event's organization and id
//! (see [`keys`](super::keys)).

use aws_sdk_dynamodb::types::AttributeValue;

use super::keys::{event_pk, key, EVENT_SK};
use super::{backend, DynamoStore};
use crate::ids::OrgId;
use crate::store::StoreError;

/// What the event record says of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventRecord {
    /// Never ingested.
    Absent,
    /// An ingestion failed part-way (its history may be written, its jobs
    /// may be on the queue): a retry completes it with the same
    /// `accepted_at`, so it writes the same history items, not new ones.
    Partial {
        /// When the event was first accepted (epoch ms): its history items' time.
        accepted_at: i64,
    },
    /// Ingested: a redelivery is a no-op.
    Done,
}

const PARTIAL: &str = "partialAcceptedAt";

impl DynamoStore {
    /// The event's record (strongly consistent).
    pub async fn event_record(
        &self,
        org_id: &OrgId,
        event_id: &str,
    ) -> Result<EventRecord, StoreError> {
        let seen = self
            .client
            .get_item()
            .table_name(&self.tables.messages)
            .set_key(Some(key(event_pk(org_id, event_id), EVENT_SK.into())))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        Ok(match seen.item() {
            None => EventRecord::Absent,
            Some(item) => match item.get(PARTIAL).and_then(|v| v.as_n().ok()) {
                Some(n) => EventRecord::Partial {
                    accepted_at: n.parse().map_err(|_| {
                        StoreError::corrupt(
                            format!("{}/{EVENT_SK}", event_pk(org_id, event_id)),
                            format!("malformed '{PARTIAL}': {n}"),
                        )
                    })?,
                },
                None => EventRecord::Done,
            },
        })
    }

    /// Records the event as ingested; DynamoDB removes the record at
    /// `expires_at_secs`.
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

    /// Records that an ingestion accepted at `accepted_at` failed part-way
    /// (never over a record of an ingested event). Only a failed ingestion
    /// pays this write.
    pub async fn record_partial_event(
        &self,
        org_id: &OrgId,
        event_id: &str,
        accepted_at: i64,
        expires_at_secs: i64,
    ) -> Result<(), StoreError> {
        let mut item = key(event_pk(org_id, event_id), EVENT_SK.into());
        item.insert("ttl".into(), AttributeValue::N(expires_at_secs.to_string()));
        item.insert(PARTIAL.into(), AttributeValue::N(accepted_at.to_string()));
        let result = self
            .client
            .put_item()
            .table_name(&self.tables.messages)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk) OR attribute_exists(#p)")
            .expression_attribute_names("#p", PARTIAL)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // An ingested event's record stays as it is.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(())
            }
            Err(e) => Err(backend(e)),
        }
    }
}
