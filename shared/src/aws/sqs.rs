//! The delivery queue on SQS: `SendMessageBatch` to enqueue, visibility
//! timeouts as leases (`ChangeMessageVisibility` schedules a retry), an
//! explicit dead-letter queue for notifications that are given up on.
//!
//! Two ways to consume, one [`DeliveryQueue`] each, both settled by the same
//! `delivery::deliver`:
//! - [`SqsQueue`] polls (`webhooks-local --backend aws`, the way Lambda's
//!   event source mapping does) and completes a message by deleting it;
//! - [`SqsEventBatch`] is one batch pushed by Lambda's event source mapping:
//!   a message is completed by leaving it out of the batch response's
//!   failures (Lambda deletes it), never by a delete of ours.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::types::{MessageSystemAttributeName, SendMessageBatchRequestEntry};
use aws_sdk_sqs::Client;

use crate::queue::{DeliveryJob, DeliveryQueue, Lease, QueueError};

/// SQS's longest visibility timeout (12 hours).
const MAX_VISIBILITY: Duration = Duration::from_secs(43_200);

#[derive(Clone)]
pub struct SqsQueue {
    client: Client,
    queue_url: String,
    dead_letter_url: Option<String>,
}

fn err(e: impl std::fmt::Display) -> QueueError {
    QueueError::backend(e)
}

/// A failed SQS call: [`QueueError::unavailable`] when it is worth retrying
/// later ([`crate::aws::is_transient`]).
fn sdk_err<E>(
    e: aws_sdk_sqs::error::SdkError<E, aws_sdk_sqs::config::http::HttpResponse>,
) -> QueueError
where
    E: aws_sdk_sqs::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    // A queue that does not exist (yet) is a deployment being rebuilt or
    // misconfigured: a 503 tells producers to come back, and the error log
    // names it either way.
    let missing = e
        .as_service_error()
        .and_then(|s| s.code())
        .is_some_and(|code| {
            matches!(
                code,
                "AWS.SimpleQueueService.NonExistentQueue" | "QueueDoesNotExist"
            )
        });
    let transient = missing || crate::aws::is_transient(&e);
    let e = aws_sdk_sqs::error::DisplayErrorContext(e);
    match transient {
        true => QueueError::unavailable(format!("SQS: {e}")),
        false => err(e),
    }
}

fn secs(d: Duration) -> i32 {
    d.min(MAX_VISIBILITY).as_secs_f64().ceil() as i32
}

impl SqsQueue {
    pub fn new(
        client: Client,
        queue_url: impl Into<String>,
        dead_letter_url: Option<String>,
    ) -> Self {
        SqsQueue {
            client,
            queue_url: queue_url.into(),
            dead_letter_url,
        }
    }

    /// Creates (or finds) the queue `<prefix>-delivery` and its dead-letter
    /// queue `<prefix>-delivery-dlq`, for `webhooks-local --create-tables`.
    pub async fn create(client: Client, prefix: &str) -> Result<SqsQueue, String> {
        let create = |name: String| {
            let client = client.clone();
            async move {
                client
                    .create_queue()
                    .queue_name(&name)
                    .send()
                    .await
                    .map_err(|e| {
                        format!(
                            "creating SQS queue {name}: {}",
                            aws_sdk_sqs::error::DisplayErrorContext(e)
                        )
                    })?
                    .queue_url()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("SQS returned no URL for {name}"))
            }
        };
        let dead_letters = create(format!("{prefix}-delivery-dlq")).await?;
        let url = create(format!("{prefix}-delivery")).await?;
        Ok(SqsQueue::new(client, url, Some(dead_letters)))
    }

    /// The lease for an SQS message (from `ReceiveMessage` or a Lambda event).
    pub fn lease(
        body: &str,
        receipt: &str,
        receive_count: Option<&str>,
    ) -> Result<Lease, QueueError> {
        let job: DeliveryJob =
            serde_json::from_str(body).map_err(|e| err(format!("not a delivery job: {e}")))?;
        Ok(Lease {
            job,
            attempt: receive_count.and_then(|c| c.parse().ok()).unwrap_or(1),
            receipt: receipt.to_owned(),
        })
    }
}

/// The job's W3C `traceparent` as a message attribute too, for tools that
/// read attributes (the job's body carries it for the delivery).
fn traceparent_attribute(
    job: &DeliveryJob,
) -> Option<std::collections::HashMap<String, aws_sdk_sqs::types::MessageAttributeValue>> {
    let value = aws_sdk_sqs::types::MessageAttributeValue::builder()
        .data_type("String")
        .string_value(job.traceparent.clone()?)
        .build()
        .ok()?;
    Some([("traceparent".to_owned(), value)].into())
}

#[async_trait]
impl DeliveryQueue for SqsQueue {
    async fn enqueue(&self, jobs: Vec<DeliveryJob>) -> Result<(), QueueError> {
        for chunk in jobs.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, job)| {
                    SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(serde_json::to_string(job).expect("job serialises"))
                        .set_message_attributes(traceparent_attribute(job))
                        .build()
                        .map_err(err)
                })
                .collect::<Result<Vec<_>, _>>()?;
            let out = self
                .client
                .send_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(sdk_err)?;
            if let Some(failed) = out.failed().first() {
                // SQS's own fault (not the sender's) is worth retrying later.
                let fail = match failed.sender_fault() {
                    true => err,
                    false => QueueError::unavailable,
                };
                return Err(fail(format!(
                    "SendMessageBatch refused {} of {} messages: {}",
                    out.failed().len(),
                    chunk.len(),
                    failed.message().unwrap_or(failed.code())
                )));
            }
        }
        Ok(())
    }

    async fn receive(&self, max: usize, visibility: Duration) -> Result<Vec<Lease>, QueueError> {
        let out = self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(max.clamp(1, 10) as i32)
            .visibility_timeout(secs(visibility))
            .wait_time_seconds(1)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(sdk_err)?;
        let mut leases = Vec::new();
        for m in out.messages() {
            let (Some(body), Some(receipt)) = (m.body(), m.receipt_handle()) else {
                continue;
            };
            let count = m
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                .map(String::as_str);
            match Self::lease(body, receipt, count) {
                Ok(lease) => leases.push(lease),
                // A body that is not a job can never be delivered: leave it to
                // the queue's redrive policy, which moves it to the DLQ.
                Err(e) => tracing::error!(error = %e, "unreadable message on the delivery queue"),
            }
        }
        Ok(leases)
    }

    async fn complete(&self, lease: &Lease) -> Result<(), QueueError> {
        self.client
            .delete_message()
            .queue_url(&self.queue_url)
            .receipt_handle(&lease.receipt)
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }

    async fn retry_after(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError> {
        self.client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(&lease.receipt)
            .visibility_timeout(secs(delay))
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }

    async fn dead_letter(&self, lease: &Lease, reason: &str) -> Result<(), QueueError> {
        self.send_to_dead_letters(lease, reason).await?;
        self.complete(lease).await
    }
}

impl SqsQueue {
    /// A copy of the job, with its reason, on the dead-letter queue.
    async fn send_to_dead_letters(&self, lease: &Lease, reason: &str) -> Result<(), QueueError> {
        let Some(dlq) = &self.dead_letter_url else {
            return Err(err(
                "no dead-letter queue is configured (WEBHOOKS_DELIVERY_DLQ_URL)",
            ));
        };
        self.client
            .send_message()
            .queue_url(dlq)
            .message_body(serde_json::to_string(&lease.job).expect("job serialises"))
            .message_attributes(
                "reason",
                aws_sdk_sqs::types::MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(reason)
                    .build()
                    .map_err(err)?,
            )
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }
}

/// One batch of Lambda's SQS event source. Every record counts as failed
/// (SQS redelivers it) until [`DeliveryQueue::complete`] or a successful
/// [`DeliveryQueue::dead_letter`] marks it done; a retry changes the
/// message's visibility and leaves it failed, so SQS redelivers it then.
pub struct SqsEventBatch {
    queue: SqsQueue,
    done: Mutex<HashSet<String>>,
}

impl SqsEventBatch {
    pub fn new(queue: SqsQueue) -> Self {
        SqsEventBatch {
            queue,
            done: Mutex::default(),
        }
    }

    /// Whether the message with this receipt handle is done with.
    pub fn is_done(&self, receipt: &str) -> bool {
        self.done
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(receipt)
    }

    fn mark_done(&self, lease: &Lease) {
        self.done
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(lease.receipt.clone());
    }
}

#[async_trait]
impl DeliveryQueue for SqsEventBatch {
    async fn enqueue(&self, jobs: Vec<DeliveryJob>) -> Result<(), QueueError> {
        self.queue.enqueue(jobs).await
    }

    async fn receive(&self, _max: usize, _visibility: Duration) -> Result<Vec<Lease>, QueueError> {
        Err(err("an event source batch is pushed by Lambda, not polled"))
    }

    async fn complete(&self, lease: &Lease) -> Result<(), QueueError> {
        self.mark_done(lease);
        Ok(())
    }

    async fn retry_after(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError> {
        self.queue.retry_after(lease, delay).await
    }

    async fn dead_letter(&self, lease: &Lease, reason: &str) -> Result<(), QueueError> {
        self.queue.send_to_dead_letters(lease, reason).await?;
        self.mark_done(lease);
        Ok(())
    }
}
