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
//! A failure that is seen (an error, not a crash) also leaves a partial
//! event record with the time the event was first accepted: the retry
//! writes its history under the same keys, so a notification is listed
//! once however often its ingestion was tried.

use std::sync::Arc;

use async_trait::async_trait;

use super::dynamodb::events::EventRecord;
use super::dynamodb::DynamoStore;
use super::sqs::SqsQueue;
use crate::clock::Clock;
use crate::history::DeliveryHistory;
use crate::ids::OrgId;
use crate::model::Message;
use crate::queue::{DeliveryJob, DeliveryQueue, Outbox, StoreOrQueueError};
use crate::store::Store;

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
    ) -> Result<bool, StoreOrQueueError> {
        let accepted_at = match self.store.event_record(org_id, event_id).await? {
            EventRecord::Done => return Ok(false),
            // A retry of a failed ingestion: the same history items, not new ones.
            EventRecord::Partial { accepted_at } => accepted_at,
            EventRecord::Absent => jobs.first().map_or(0, |j| j.created_at),
        };
        let jobs: Vec<DeliveryJob> = jobs
            .into_iter()
            .map(|job| DeliveryJob {
                created_at: accepted_at,
                ..job
            })
            .collect();
        let expires = self.clock.now_ms() / 1000 + EVENT_RECORD_DAYS * 86_400;
        let result = self.ingest(org_id, event_id, message, jobs).await;
        if result.is_err() && accepted_at != 0 {
            // Best effort: the error is what the caller needs to hear.
            let _ = self
                .store
                .record_partial_event(org_id, event_id, accepted_at, expires)
                .await;
        }
        result?;
        self.store.record_event(org_id, event_id, expires).await?;
        Ok(true)
    }
}

impl AwsOutbox {
    /// The message, the history, then the queue (see the module's comment).
    async fn ingest(
        &self,
        org_id: &OrgId,
        event_id: &str,
        message: Option<&Message>,
        jobs: Vec<DeliveryJob>,
    ) -> Result<(), StoreOrQueueError> {
        if let Some(message) = message {
            let received_at = self.clock.now_ms();
            self.store.put_message(org_id, message, received_at).await?;
        }
        if !jobs.is_empty() {
            self.store.record_enqueued(event_id, &jobs).await?;
            self.queue.enqueue(jobs).await?;
        }
        Ok(())
    }
}
