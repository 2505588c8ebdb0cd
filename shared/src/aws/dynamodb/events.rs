//! What an ingestion left behind, for the AWS outbox's deduplication: the
//! notification items (`NOTIF#<org>#<uuid>`, see [`keys`](super::keys)),
//! which every notification has anyway and which are keyed by the
//! deterministic notification ids, so an event needs no item of its own.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::codec::{number, text};
use super::history_items::{notification_item, UNFINISHED};
use super::keys::{key, notification_pk, NOTIFICATION_SK};
use super::{DynamoStore, Item};
use crate::ids::NotificationId;
use crate::queue::DeliveryJob;
use crate::store::StoreError;

/// What a job's notification item says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The time its ingestion was first accepted (its history's key).
    pub created_at: i64,
    /// An ingestion failed after it may have written it (its job may not
    /// be on the queue): a retry completes it.
    pub unfinished: bool,
}

impl DynamoStore {
    /// The notification items of `jobs` that exist, by notification id
    /// (`BatchGetItem`, strongly consistent: a repeat right after the
    /// first ingestion must see it).
    pub async fn written_notifications(
        &self,
        jobs: &[DeliveryJob],
    ) -> Result<HashMap<NotificationId, Written>, StoreError> {
        if jobs.is_empty() {
            return Ok(HashMap::new());
        }
        let keys = jobs
            .iter()
            .map(|job| {
                key(
                    notification_pk(&job.org_id, &job.id),
                    NOTIFICATION_SK.into(),
                )
            })
            .collect();
        let mut written = HashMap::new();
        for item in self
            .batch_get(&self.tables.messages, keys, "ingestion check")
            .await?
        {
            let pk = text(&item, "pk")?;
            let Some(id) = pk.rsplit('#').next() else {
                continue;
            };
            written.insert(
                NotificationId::from(id),
                Written {
                    created_at: number(&item, "createdAt")?,
                    unfinished: matches!(item.get(UNFINISHED), Some(AttributeValue::Bool(true))),
                },
            );
        }
        Ok(written)
    }

    /// Writes the jobs' notification items marked unfinished, after an
    /// ingestion failed past its first write. Only a failed ingestion pays
    /// this; the retry's own write of the items clears the mark.
    pub async fn mark_unfinished(&self, jobs: &[DeliveryJob]) -> Result<(), StoreError> {
        self.batch_write(self.notification_items(jobs, true)).await
    }

    /// Writes the jobs' notification items without the mark, once their
    /// jobs are queued (after [`Self::record_enqueued_unfinished`]).
    pub async fn mark_finished(&self, jobs: &[DeliveryJob]) -> Result<(), StoreError> {
        self.batch_write(self.notification_items(jobs, false)).await
    }

    /// [`DeliveryHistory::record_enqueued`](crate::history::DeliveryHistory::record_enqueued)
    /// with the notification items marked unfinished, for an event whose
    /// caller cannot tell a redelivery: the mark stays if the process dies
    /// before [`Self::mark_finished`].
    pub async fn record_enqueued_unfinished(
        &self,
        event_id: &str,
        jobs: &[DeliveryJob],
    ) -> Result<(), StoreError> {
        self.write_enqueued(event_id, jobs, true).await
    }

    /// The jobs' notification items, marked unfinished if asked.
    pub(super) fn notification_items(&self, jobs: &[DeliveryJob], unfinished: bool) -> Vec<Item> {
        jobs.iter()
            .map(|job| {
                let mut item = notification_item(job, self.history_ttl(job.created_at));
                if unfinished {
                    item.insert(UNFINISHED.into(), AttributeValue::Bool(true));
                }
                item
            })
            .collect()
    }
}
