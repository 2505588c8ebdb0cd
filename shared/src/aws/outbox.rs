//! The outbox on AWS: the message and the notifications' history (PENDING)
//! in DynamoDB, the notifications on SQS, and an event record that makes a
//! redelivered SQS event a no-op.
//!
//! DynamoDB and SQS share no transaction, so the steps are ordered to be
//! safe to repeat: the history before the notifications are on the queue
//! (a notification is listed from the moment it can be delivered), the
//! event record last, after the notifications are on the queue. A failure in between fails the SQS
//! record; its retry stores the same message again and enqueues the same
//! notifications again (same `uuid`s, so receivers can drop duplicates).

use std::sync::Arc;

use async_trait::async_trait;

use super::dynamodb::DynamoStore;
use super::sqs::SqsQueue;
use crate::clock::Clock;
use crate::history::DeliveryHistory;
use crate::ids::OrgId;
use crate::model::Message;
use crate::queue::{DeliveryJob, DeliveryQueue, Outbox, QueueError};
use crate::store::{Store, StoreError};

/// Event records are kept this long (DynamoDB TTL): longer than SQS keeps a message.
const EVENT_RECORD_DAYS: i64 = 15;

pub struct AwsOutbox {
    store: Arc<DynamoStore>,
    queue: SqsQueue,
    clock: Arc<dyn Clock>,
}

impl AwsOutbox {
    pub fn new(store: Arc<DynamoStore>, queue: SqsQueue, clock: Arc<dyn Clock>) -> Self {
        AwsOutbox {
            store,
            queue,
            clock,
        }
    }
}

#[async_trait]
impl Outbox for AwsOutbox {
    async fn commit(
        &self,
        org_id: &OrgId,
        event_id: &str,
        message: Option<&Message>,
        jobs: Vec<DeliveryJob>,
    ) -> Result<bool, StoreError> {
        if self.store.event_recorded(org_id, event_id).await? {
            return Ok(false);
        }
        if let Some(message) = message {
            let received_at = self.clock.now_ms();
            self.store.put_message(org_id, message, received_at).await?;
        }
        if !jobs.is_empty() {
            self.store.record_enqueued(event_id, &jobs).await?;
            self.queue.enqueue(jobs).await.map_err(|e| match e {
                QueueError::Unavailable(detail) => StoreError::QueueUnavailable(detail),
                QueueError::Backend(_) => StoreError::Backend(e.to_string()),
            })?;
        }
        let expires = self.clock.now_ms() / 1000 + EVENT_RECORD_DAYS * 86_400;
        self.store.record_event(org_id, event_id, expires).await?;
        Ok(true)
    }
}
