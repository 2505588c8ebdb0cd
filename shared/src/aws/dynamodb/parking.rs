//! The [`ParkingLot`] on DynamoDB: the jobs of a subscription whose circuit
//! breaker is open, out of the SQS queue until it closes (one write to
//! park, one `Query` and a `BatchWriteItem` of deletes to put 100 back),
//! instead of a send, a receive and a delete per job every cool-down.
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | parked job | `PARKED#<subscription>` | `<created ms, 13 digits>#<uuid>` | `job` (the job's JSON), `ttl` |
//!
//! In the messages table, beside the delivery history, with its retention.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};

use super::codec::{n, s, text};
use super::keys::{key, parked_pk, summary_sk};
use super::{backend, backend_build, DynamoStore};
use crate::ids::SubscriptionId;
use crate::queue::{DeliveryJob, ParkingLot, QueueError};

#[async_trait]
impl ParkingLot for DynamoStore {
    async fn park(&self, job: &DeliveryJob) -> Result<(), QueueError> {
        let mut item = key(
            parked_pk(&job.subscription_id),
            summary_sk(job.created_at, &job.id),
        );
        item.insert(
            "job".into(),
            s(serde_json::to_string(job).expect("job serialises")),
        );
        item.insert(
            "ttl".into(),
            n(job.created_at / 1000 + self.retention.as_secs() as i64),
        );
        self.client
            .put_item()
            .table_name(&self.tables.messages)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| QueueError::from(backend(e)))?;
        Ok(())
    }

    async fn parked(
        &self,
        subscription: &SubscriptionId,
        max: usize,
    ) -> Result<Vec<DeliveryJob>, QueueError> {
        let out = self
            .client
            .query()
            .table_name(&self.tables.messages)
            .consistent_read(true)
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_values(":pk", s(parked_pk(subscription)))
            .limit(max.clamp(1, 1000) as i32)
            .send()
            .await
            .map_err(|e| QueueError::from(backend(e)))?;
        out.items()
            .iter()
            .map(|item| {
                let json = text(item, "job").map_err(QueueError::from)?;
                serde_json::from_str(&json).map_err(|e| QueueError::Corrupt {
                    key: format!(
                        "{}/{}",
                        parked_pk(subscription),
                        text(item, "sk").unwrap_or_default()
                    ),
                    problem: format!("a parked job is not a job: {e}"),
                })
            })
            .collect()
    }

    async fn release(
        &self,
        subscription: &SubscriptionId,
        jobs: &[DeliveryJob],
    ) -> Result<(), QueueError> {
        let requests = jobs
            .iter()
            .map(|job| {
                DeleteRequest::builder()
                    .set_key(Some(key(
                        parked_pk(subscription),
                        summary_sk(job.created_at, &job.id),
                    )))
                    .build()
                    .map(|d| WriteRequest::builder().delete_request(d).build())
                    .map_err(|e| QueueError::from(backend_build(e)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.write_messages_table(requests, "release parked jobs")
            .await
            .map_err(QueueError::from)
    }
}
