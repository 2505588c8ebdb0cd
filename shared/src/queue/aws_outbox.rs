//! The outbox on AWS: the message in DynamoDB, the notifications on SQS,
//! and an event record that makes a redelivered SQS event a no-op.
//!
//! DynamoDB and SQS share no transaction, so the steps are ordered to be
//! safe to repeat: the event record is written last, after the
//! notifications are on the queue. A failure in between fails the SQS
//! record; its retry stores the same message again and enqueues the same
//! notifications again (same `uuid`s, so receivers can drop duplicates).

use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;

use super::sqs::SqsQueue;
use super::{DeliveryJob, DeliveryQueue, Outbox};
use crate::app::now_ms;
use crate::model::Message;
use crate::store::dynamodb::DynamoStore;
use crate::store::{Store, StoreError};

/// Event records are kept this long (DynamoDB TTL): longer than SQS keeps a message.
const EVENT_RECORD_DAYS: i64 = 15;

pub struct AwsOutbox {
    store: Arc<DynamoStore>,
    queue: SqsQueue,
}

impl AwsOutbox {
    pub fn new(store: Arc<DynamoStore>, queue: SqsQueue) -> Self {
        AwsOutbox { store, queue }
    }

    fn key(org_id: &str, event_id: &str) -> [(String, AttributeValue); 2] {
        [
            ("pk".to_owned(), AttributeValue::S(format!("ORG#{org_id}"))),
            (
                "sk".to_owned(),
                AttributeValue::S(format!("EVENT#{event_id}")),
            ),
        ]
    }
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

#[async_trait]
impl Outbox for AwsOutbox {
    async fn commit(
        &self,
        org_id: &str,
        event_id: &str,
        message: Option<&Message>,
        jobs: Vec<DeliveryJob>,
    ) -> Result<bool, StoreError> {
        let table = &self.store.tables().messages;
        let seen = self
            .store
            .client()
            .get_item()
            .table_name(table)
            .set_key(Some(Self::key(org_id, event_id).into_iter().collect()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| backend(aws_sdk_dynamodb::error::DisplayErrorContext(e)))?;
        if seen.item().is_some() {
            return Ok(false);
        }
        if let Some(message) = message {
            self.store.put_message(org_id, message).await?;
        }
        if !jobs.is_empty() {
            self.queue.enqueue(jobs).await.map_err(backend)?;
        }
        let expires = now_ms() / 1000 + EVENT_RECORD_DAYS * 86_400;
        self.store
            .client()
            .put_item()
            .table_name(table)
            .set_item(Some(
                Self::key(org_id, event_id)
                    .into_iter()
                    .chain([("ttl".to_owned(), AttributeValue::N(expires.to_string()))])
                    .collect(),
            ))
            .send()
            .await
            .map_err(|e| backend(aws_sdk_dynamodb::error::DisplayErrorContext(e)))?;
        Ok(true)
    }
}
