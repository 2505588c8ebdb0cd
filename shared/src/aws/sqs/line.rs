//! The FIFO delivery queue of ordered subscriptions ([`SqsQueue::with_ordered`]):
//! its messages in the subscription's group, kept in their line by their
//! visibility, received one at a time, dead-lettered to the FIFO DLQ (see
//! the parent module's docs).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::types::SendMessageBatchRequestEntry;

use super::{err, sdk_err, traceparent_attribute, SqsQueue, POLLERS};
use crate::queue::{DeliveryJob, Lease, QueueError};

/// The longest wait of a message kept in its line: SQS's 12 hours from its
/// receive, less a margin for the time the delivery took. A longer wait
/// comes back early and is deferred again (`delivery::deliver` reads the
/// retry's time from the history).
const MAX_IN_LINE: Duration = Duration::from_secs(43_200 - 600);

/// How a lease's receipt starts when its message is on the FIFO queue.
pub const FIFO_RECEIPT: &str = "fifo:";

/// How long after the FIFO poller last received a message it polls without
/// waiting: a line's next message is returned as soon as the one before it
/// is settled, and an emulator's long poll does not wake for that.
const LINE_BUSY_MS: i64 = 10_000;

/// The FIFO delivery queue of ordered subscriptions and its dead-letter queue.
pub(super) struct OrderedQueue {
    pub(super) url: String,
    dead_letter_url: Option<String>,
    /// When the poller last received from it (epoch ms).
    busy_at: AtomicI64,
}

/// The SQS receipt handle of a lease on the FIFO queue; None for the standard queue.
pub(super) fn in_line(receipt: &str) -> Option<&str> {
    receipt.strip_prefix(FIFO_RECEIPT)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(crate::clock::millis)
        .unwrap_or(0)
}

impl SqsQueue {
    /// Sends ordered jobs to the FIFO queue at `url` (dead letters to
    /// `dead_letter_url`); without it they go to the standard queue, unordered.
    pub fn with_ordered(mut self, url: impl Into<String>, dead_letter_url: Option<String>) -> Self {
        self.ordered = Some(Arc::new(OrderedQueue {
            url: url.into(),
            dead_letter_url,
            busy_at: AtomicI64::new(0),
        }));
        self
    }

    /// Whether ordered jobs have their FIFO queue.
    pub fn keeps_order(&self) -> bool {
        self.ordered.is_some()
    }

    /// The same queue, polling the FIFO queue instead of the standard one
    /// (`webhooks-local --backend aws` runs a worker loop on each); None
    /// without a FIFO queue.
    pub fn ordered_poller(&self) -> Option<SqsQueue> {
        self.ordered.as_ref()?;
        Some(SqsQueue {
            polls_line: true,
            ..self.clone()
        })
    }

    /// The lease for a message of the FIFO queue: its receipt marked so
    /// ([`FIFO_RECEIPT`]). Its attempt is SQS's receive count until the
    /// pipeline reads the history ([`DeliveryQueue::attempts_from_history`](crate::queue::DeliveryQueue::attempts_from_history)).
    pub fn ordered_lease(
        body: &str,
        receipt: &str,
        receive_count: Option<&str>,
    ) -> Result<Lease, QueueError> {
        let mut lease = Self::lease(body, &format!("{FIFO_RECEIPT}{receipt}"), receive_count)?;
        lease.job.ordered = true;
        Ok(lease)
    }

    /// The receipt of a lease on the message with `handle`, from the FIFO
    /// queue when `fifo` (what [`SqsEventBatch::is_done`](super::SqsEventBatch::is_done) is asked with).
    pub fn receipt(fifo: bool, handle: &str) -> String {
        match fifo {
            true => format!("{FIFO_RECEIPT}{handle}"),
            false => handle.to_owned(),
        }
    }

    /// A batch entry for `job` on the FIFO queue: in its subscription's
    /// group, deduplicated by its uuid (an ingestion tried again within
    /// SQS's 5 minutes is sent once), or for a resend or recover by its
    /// uuid and the attempts before it (not taken for the scheduled one).
    /// No delay: FIFO queues take none per message.
    pub(super) fn line_entry(
        id: usize,
        job: &DeliveryJob,
    ) -> Result<SendMessageBatchRequestEntry, QueueError> {
        let dedup = match job.trigger {
            crate::queue::Trigger::Scheduled => job.id.to_string(),
            crate::queue::Trigger::Manual => format!("{}-manual-{}", job.id, job.history_attempts),
        };
        SendMessageBatchRequestEntry::builder()
            .id(id.to_string())
            .message_body(serde_json::to_string(job).expect("job serialises"))
            .message_group_id(job.subscription_id.as_str())
            .message_deduplication_id(dedup)
            .set_message_attributes(traceparent_attribute(job))
            .build()
            .map_err(err)
    }

    /// A message kept in its line, visible again after `delay` (whole
    /// seconds, SQS's unit, rounded to the nearest): its group stays locked
    /// meanwhile.
    pub(super) async fn keep_in_line(
        &self,
        handle: &str,
        delay: Duration,
    ) -> Result<(), QueueError> {
        let Some(ordered) = &self.ordered else {
            return Err(err(
                "a FIFO lease without a FIFO queue (WEBHOOKS_ORDERED_QUEUE_URL)",
            ));
        };
        self.client
            .change_message_visibility()
            .queue_url(&ordered.url)
            .receipt_handle(handle)
            .visibility_timeout(delay.min(MAX_IN_LINE).as_secs_f64().round() as i32)
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }

    /// A poll of the FIFO queue: up to [`POLLERS`] calls of one message each,
    /// one after another, until one finds none. One message a call: a call
    /// may return a line's next messages with its head. One call at a time:
    /// SQS keeps concurrent calls from taking two of a group, but moto's
    /// emulator does not, and a poll's calls are a few milliseconds each.
    /// The first waits a second for messages unless the queue was busy lately.
    pub(super) async fn receive_in_line(
        &self,
        max: usize,
        visibility: Duration,
    ) -> Result<Vec<Lease>, QueueError> {
        let Some(ordered) = &self.ordered else {
            return Ok(Vec::new());
        };
        let busy = now_ms() - ordered.busy_at.load(Ordering::Relaxed) < LINE_BUSY_MS;
        let mut leases = Vec::new();
        for i in 0..max.clamp(1, POLLERS) {
            let wait = if i == 0 && !busy { 1 } else { 0 };
            match self.receive_from(&ordered.url, 1, visibility, wait).await {
                Ok(batch) if batch.is_empty() => break,
                Ok(batch) => leases.extend(batch.into_iter().map(|r| r.lease)),
                Err(e) if leases.is_empty() => return Err(e),
                Err(_) => break,
            }
        }
        if !leases.is_empty() {
            ordered.busy_at.store(now_ms(), Ordering::Relaxed);
        }
        Ok(leases)
    }

    pub(super) async fn send_to_ordered_dead_letters(
        &self,
        lease: &Lease,
        reason: &str,
    ) -> Result<(), QueueError> {
        let Some(dlq) = self
            .ordered
            .as_ref()
            .and_then(|o| o.dead_letter_url.as_ref())
        else {
            return Err(err(
                "no FIFO dead-letter queue is configured (WEBHOOKS_ORDERED_DLQ_URL)",
            ));
        };
        let job = &lease.job;
        self.client
            .send_message()
            .queue_url(dlq)
            .message_body(serde_json::to_string(job).expect("job serialises"))
            .message_group_id(job.subscription_id.as_str())
            .message_deduplication_id(format!("{}-dead-{}", job.id, lease.attempt))
            .message_attributes("reason", super::reason_attribute(reason)?)
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }
}
