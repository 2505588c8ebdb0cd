//! The delivery queue on SQS: `SendMessageBatch` to enqueue, visibility
//! timeouts as leases, an explicit dead-letter queue for notifications that
//! are given up on.
//!
//! A retry or a deferral is not held in flight for its wait: the job is sent
//! again with a delay (`DelaySeconds`, at most 15 minutes; a longer wait
//! carries `notBefore` and goes in hops) and the received message is
//! deleted, so the messages in flight are only those being worked on. The
//! job carries the attempts made so far (`attempts`). Every message has
//! `MessageGroupId` = the subscription id, so an SQS fair queue keeps one
//! noisy subscription from delaying the others.
//!
//! Ordered jobs ([`DeliveryJob::ordered`]) go to a FIFO queue beside it
//! (`WEBHOOKS_ORDERED_QUEUE_URL`), `MessageGroupId` = the subscription id,
//! where a message keeps its place: a retry or a deferral sets the received
//! message's visibility to its wait (`ChangeMessageVisibility`, at most
//! 12 hours) instead of sending it again, and its group stays locked while
//! it is invisible, so nothing after it in the line is received. Such a
//! lease's receipt says so ([`FIFO_RECEIPT`]); its attempt number is read
//! from the history ([`DeliveryQueue::attempts_from_history`]). It is
//! never parked (that would take it out of its line) but deferred, and a
//! dead letter goes to the FIFO dead-letter queue.
//!
//! Two ways to consume, one [`DeliveryQueue`] each, both settled by the same
//! `delivery::deliver`:
//! - [`SqsQueue`] polls (`webhooks-local --backend aws`, the way Lambda's
//!   event source mapping does) and completes a message by deleting it;
//! - [`SqsEventBatch`] is one batch pushed by Lambda's event source mapping:
//!   a message is completed by leaving it out of the batch response's
//!   failures (Lambda deletes it), never by a delete of ours.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::types::{MessageSystemAttributeName, SendMessageBatchRequestEntry};
use aws_sdk_sqs::Client;

use crate::ids::SubscriptionId;
use crate::queue::{DeliveryJob, DeliveryQueue, Lease, ParkingLot, QueueError};

mod line;
mod received;
mod send;
pub use line::FIFO_RECEIPT;
use line::{in_line, OrderedQueue};
use received::{once_each, Received};
pub(crate) use send::INGEST_SENDS;

/// SQS's longest visibility timeout (12 hours).
const MAX_VISIBILITY: Duration = Duration::from_secs(43_200);
/// SQS's longest delay of one message (15 minutes).
const MAX_DELAY: Duration = Duration::from_secs(900);

/// The delivery queue on SQS, polled (`webhooks-local --backend aws`).
#[derive(Clone)]
pub struct SqsQueue {
    client: Client,
    queue_url: String,
    dead_letter_url: Option<String>,
    /// Where jobs of an open breaker wait ([`DeliveryQueue::park`]); without
    /// one they are deferred like the others.
    parking: Option<Arc<dyn ParkingLot>>,
    /// The FIFO queue of ordered jobs, when there is one.
    ordered: Option<Arc<OrderedQueue>>,
    /// This handle polls the FIFO queue ([`SqsQueue::ordered_poller`]).
    polls_line: bool,
}

fn err(e: impl Into<crate::store::Cause>) -> QueueError {
    QueueError::backend(e)
}

/// A failed SQS call: its error code and message, or why no answer came,
/// with the SDK's error as its source.
#[derive(Debug, thiserror::Error)]
#[error("SQS {summary}")]
pub struct SqsError {
    summary: String,
    #[source]
    source: crate::store::Cause,
}

/// A failed SQS call: [`QueueError::unavailable`] when it is worth retrying
/// later ([`crate::aws::is_transient`]).
fn sdk_err<E>(
    e: aws_sdk_sqs::error::SdkError<E, aws_sdk_sqs::config::http::HttpResponse>,
) -> QueueError
where
    E: aws_sdk_sqs::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    SqsCallError::of(e).error()
}

/// A failed SQS call's error, and whether it is worth retrying; shared by
/// the jobs it carried (each gets its [`QueueError`]).
struct SqsCallError {
    transient: bool,
    error: Arc<SqsError>,
}

impl SqsCallError {
    fn of<E>(e: aws_sdk_sqs::error::SdkError<E, aws_sdk_sqs::config::http::HttpResponse>) -> Self
    where
        E: aws_sdk_sqs::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
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
        let error = SqsError {
            summary: aws_sdk_sqs::error::DisplayErrorContext(&e).to_string(),
            source: Box::new(e),
        };
        SqsCallError {
            transient,
            error: Arc::new(error),
        }
    }

    fn error(&self) -> QueueError {
        match self.transient {
            true => QueueError::unavailable(self.error.clone()),
            false => err(self.error.clone()),
        }
    }
}

fn secs(d: Duration) -> i32 {
    d.min(MAX_VISIBILITY).as_secs_f64().ceil() as i32
}

impl SqsQueue {
    /// The queue at `queue_url`, dead-lettering to `dead_letter_url` when there is one.
    pub fn new(
        client: Client,
        queue_url: impl Into<String>,
        dead_letter_url: Option<String>,
    ) -> Self {
        SqsQueue {
            client,
            queue_url: queue_url.into(),
            dead_letter_url,
            parking: None,
            ordered: None,
            polls_line: false,
        }
    }

    /// The queue's URL.
    pub fn url(&self) -> &str {
        &self.queue_url
    }

    /// The dead-letter queue's URL, when there is one.
    pub fn dead_letter_url(&self) -> Option<&str> {
        self.dead_letter_url.as_deref()
    }

    /// Parks the jobs of open breakers in `lot`.
    pub fn with_parking(mut self, lot: Arc<dyn ParkingLot>) -> Self {
        self.parking = Some(lot);
        self
    }

    /// The job parked (its attempt not counted), then its message done with
    /// by `done`; without a parking lot, or kept in its line, deferred.
    async fn park_job(&self, lease: &Lease) -> Result<bool, QueueError> {
        let Some(lot) = &self.parking else {
            return Ok(false);
        };
        if in_line(&lease.receipt).is_some() {
            return Ok(false);
        }
        let mut job = lease.job.clone();
        job.attempts = lease.attempt.saturating_sub(1);
        job.not_before = None;
        lot.park(&job).await?;
        Ok(true)
    }

    /// Every parked job of `subscription` back on the queue, due now, in
    /// batches of 100: sent first, then forgotten (a crash in between sends
    /// some twice, never loses one).
    async fn unpark_all(&self, subscription: &SubscriptionId) -> Result<usize, QueueError> {
        let Some(lot) = &self.parking else {
            return Ok(0);
        };
        let mut total = 0;
        loop {
            let jobs = lot.parked(subscription, 100).await?;
            if jobs.is_empty() {
                return Ok(total);
            }
            self.enqueue(jobs.clone()).await?;
            lot.release(subscription, &jobs).await?;
            total += jobs.len();
        }
    }

    /// Creates (or finds) the queue `<prefix>-delivery` and its dead-letter
    /// queue `<prefix>-delivery-dlq`, for `webhooks-local --create-tables`.
    pub async fn create(client: Client, prefix: &str) -> Result<SqsQueue, QueueError> {
        let create = |name: String, fifo: bool| {
            let client = client.clone();
            async move {
                let request = client.create_queue().queue_name(&name);
                let request = match fifo {
                    true => request
                        .attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true"),
                    false => request,
                };
                request
                    .send()
                    .await
                    .map_err(|e| err(format!("creating SQS queue {name}: {}", sdk_err(e))))?
                    .queue_url()
                    .map(str::to_owned)
                    .ok_or_else(|| err(format!("SQS returned no URL for {name}")))
            }
        };
        let dead_letters = create(format!("{prefix}-delivery-dlq"), false).await?;
        let url = create(format!("{prefix}-delivery"), false).await?;
        let ordered_dead_letters = create(format!("{prefix}-ordered-dlq.fifo"), true).await?;
        let ordered = create(format!("{prefix}-ordered.fifo"), true).await?;
        Ok(SqsQueue::new(client, url, Some(dead_letters))
            .with_ordered(ordered, Some(ordered_dead_letters)))
    }

    /// The lease for an SQS message (from `ReceiveMessage` or a Lambda event).
    pub fn lease(
        body: &str,
        receipt: &str,
        receive_count: Option<&str>,
    ) -> Result<Lease, QueueError> {
        let job: DeliveryJob =
            serde_json::from_str(body).map_err(|e| err(format!("not a delivery job: {e}")))?;
        // A message received again after its lease ran out (a crash) counts
        // as another attempt, as before retries were new messages.
        let received = receive_count.and_then(|c| c.parse().ok()).unwrap_or(1u32);
        Ok(Lease {
            attempt: job.attempts.saturating_add(received.max(1)),
            job,
            receipt: receipt.to_owned(),
            slot: None,
        })
    }

    /// A batch entry for `job`, in its subscription's message group, due
    /// after `delay`.
    fn entry(
        id: usize,
        job: &DeliveryJob,
        delay: Duration,
    ) -> Result<SendMessageBatchRequestEntry, QueueError> {
        SendMessageBatchRequestEntry::builder()
            .id(id.to_string())
            .message_body(serde_json::to_string(job).expect("job serialises"))
            .message_group_id(job.subscription_id.as_str())
            .set_message_attributes(traceparent_attribute(job))
            .delay_seconds(delay.min(MAX_DELAY).as_secs_f64().ceil() as i32)
            .build()
            .map_err(err)
    }

    /// The job of `lease` sent again, due after `delay`, with `attempts`
    /// made: a wait past [`MAX_DELAY`] carries `notBefore` and hops.
    async fn send_again(
        &self,
        lease: &Lease,
        attempts: u32,
        delay: Duration,
    ) -> Result<(), QueueError> {
        let mut job = lease.job.clone();
        job.attempts = attempts;
        job.not_before = (delay > MAX_DELAY).then(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(crate::clock::millis)
                .unwrap_or(0);
            now + crate::clock::millis(delay)
        });
        self.send_batch(&[Self::entry(0, &job, delay)?]).await
    }

    async fn send_batch(&self, entries: &[SendMessageBatchRequestEntry]) -> Result<(), QueueError> {
        let refused = self
            .send_entries(&self.queue_url, entries.to_vec())
            .await
            .map_err(|e| e.error())?;
        match refused.into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }
}

/// A dead letter's reason, as the message attribute `reason`.
fn reason_attribute(reason: &str) -> Result<aws_sdk_sqs::types::MessageAttributeValue, QueueError> {
    aws_sdk_sqs::types::MessageAttributeValue::builder()
        .data_type("String")
        .string_value(reason)
        .build()
        .map_err(err)
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
        self.send_all(&jobs, send::ENQUEUE_SENDS)
            .await
            .into_iter()
            .collect()
    }

    /// SQS cannot tell how many messages of a subscription are in flight:
    /// `per_subscription` is left to the pipeline's cap.
    /// Up to [`POLLERS`] `ReceiveMessage` calls of 10 at once, as Lambda's
    /// event source polls with several pollers: a backlog of one noisy
    /// subscription's jobs (each parked or deferred in a moment) is drained
    /// that much sooner, and the jobs of the others behind it with it.
    async fn receive(
        &self,
        max: usize,
        _per_subscription: usize,
        visibility: Duration,
    ) -> Result<Vec<Lease>, QueueError> {
        if self.polls_line {
            return self.receive_in_line(max, visibility).await;
        }
        let calls = max.div_ceil(10).clamp(1, POLLERS);
        // Only the first waits for messages (long polling); the others take
        // what is there at once, so a poll ends as soon as the first has some.
        let polls = (0..calls).map(|i| {
            let wait = if i == 0 { 1 } else { 0 };
            self.receive_batch((max - 10 * i).clamp(1, 10), visibility, wait)
        });
        let mut received = Vec::new();
        let mut failure = None;
        for polled in futures_util::future::join_all(polls).await {
            match polled {
                Ok(batch) => received.extend(batch),
                Err(e) => failure = Some(e),
            }
        }
        match (received.is_empty(), failure) {
            (true, Some(e)) => Err(e),
            _ => Ok(once_each(received)),
        }
    }

    async fn complete(&self, lease: &Lease) -> Result<(), QueueError> {
        let (url, handle) = match (in_line(&lease.receipt), &self.ordered) {
            (Some(handle), Some(ordered)) => (&ordered.url, handle),
            _ => (&self.queue_url, lease.receipt.as_str()),
        };
        self.client
            .delete_message()
            .queue_url(url)
            .receipt_handle(handle)
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }

    /// Sent again (the attempt counted), then the received one deleted: a
    /// crash in between sends it twice, never loses it. Kept in its line
    /// (FIFO), the received one is made visible again after `delay`.
    async fn retry_after(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError> {
        if let Some(handle) = in_line(&lease.receipt) {
            return self.keep_in_line(handle, delay).await;
        }
        self.send_again(lease, lease.attempt, delay).await?;
        self.complete(lease).await
    }

    async fn defer(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError> {
        if let Some(handle) = in_line(&lease.receipt) {
            return self.keep_in_line(handle, delay).await;
        }
        self.send_again(lease, lease.attempt.saturating_sub(1), delay)
            .await?;
        self.complete(lease).await
    }

    async fn dead_letter(&self, lease: &Lease, reason: &str) -> Result<(), QueueError> {
        self.send_to_dead_letters(lease, reason).await?;
        self.complete(lease).await
    }

    async fn park(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError> {
        match self.park_job(lease).await? {
            true => self.complete(lease).await,
            false => self.defer(lease, delay).await,
        }
    }

    fn parks(&self) -> bool {
        self.parking.is_some()
    }

    fn attempts_from_history(&self, lease: &Lease) -> bool {
        in_line(&lease.receipt).is_some()
    }

    /// The FIFO poller: a settled head lets its line's next be received.
    fn wakes_on_settle(&self) -> bool {
        self.polls_line
    }

    async fn unpark(&self, subscription: &SubscriptionId) -> Result<usize, QueueError> {
        self.unpark_all(subscription).await
    }
}

/// Concurrent `ReceiveMessage` calls of a poll.
const POLLERS: usize = 4;

impl SqsQueue {
    async fn receive_batch(
        &self,
        max: usize,
        visibility: Duration,
        wait_seconds: i32,
    ) -> Result<Vec<Received>, QueueError> {
        self.receive_from(&self.queue_url, max, visibility, wait_seconds)
            .await
    }

    /// The messages one `ReceiveMessage` call leased, each with its id.
    async fn receive_from(
        &self,
        url: &str,
        max: usize,
        visibility: Duration,
        wait_seconds: i32,
    ) -> Result<Vec<Received>, QueueError> {
        let fifo = url != self.queue_url;
        let out = self
            .client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(max.clamp(1, 10) as i32)
            .visibility_timeout(secs(visibility))
            .wait_time_seconds(wait_seconds)
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
            let lease = match fifo {
                true => Self::ordered_lease(body, receipt, count),
                false => Self::lease(body, receipt, count),
            };
            match lease {
                Ok(lease) => leases.push(Received {
                    message_id: m.message_id().map(str::to_owned),
                    lease,
                }),
                // A body that is not a job can never be delivered: leave it to
                // the queue's redrive policy, which moves it to the DLQ.
                Err(e) => tracing::error!(error = %e, "unreadable message on the delivery queue"),
            }
        }
        Ok(leases)
    }

    /// A copy of the job, with its reason, on the dead-letter queue (a job
    /// kept in its line: the FIFO one, in its subscription's group).
    async fn send_to_dead_letters(&self, lease: &Lease, reason: &str) -> Result<(), QueueError> {
        if in_line(&lease.receipt).is_some() {
            return self.send_to_ordered_dead_letters(lease, reason).await;
        }
        let Some(dlq) = &self.dead_letter_url else {
            return Err(err(
                "no dead-letter queue is configured (WEBHOOKS_DELIVERY_DLQ_URL)",
            ));
        };
        self.client
            .send_message()
            .queue_url(dlq)
            .message_body(serde_json::to_string(&lease.job).expect("job serialises"))
            .message_attributes("reason", reason_attribute(reason)?)
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }
}

/// One batch of Lambda's SQS event source. Every record counts as failed
/// (SQS redelivers it) until [`DeliveryQueue::complete`], or a successful
/// retry, deferral or dead letter (each a message sent first) marks it done.
pub struct SqsEventBatch {
    queue: SqsQueue,
    done: Mutex<HashSet<String>>,
}

impl SqsEventBatch {
    /// The batch of a `deliver-notifications` invocation on `queue`, nothing done yet.
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

    async fn receive(
        &self,
        _max: usize,
        _per_subscription: usize,
        _visibility: Duration,
    ) -> Result<Vec<Lease>, QueueError> {
        Err(err("an event source batch is pushed by Lambda, not polled"))
    }

    async fn complete(&self, lease: &Lease) -> Result<(), QueueError> {
        self.mark_done(lease);
        Ok(())
    }

    /// Kept in its line (FIFO): made visible again after `delay` and left
    /// failed in the batch's answer, so Lambda does not delete it.
    async fn retry_after(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError> {
        if let Some(handle) = in_line(&lease.receipt) {
            return self.queue.keep_in_line(handle, delay).await;
        }
        self.queue.send_again(lease, lease.attempt, delay).await?;
        self.mark_done(lease);
        Ok(())
    }

    async fn defer(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError> {
        if let Some(handle) = in_line(&lease.receipt) {
            return self.queue.keep_in_line(handle, delay).await;
        }
        let attempts = lease.attempt.saturating_sub(1);
        self.queue.send_again(lease, attempts, delay).await?;
        self.mark_done(lease);
        Ok(())
    }

    async fn dead_letter(&self, lease: &Lease, reason: &str) -> Result<(), QueueError> {
        self.queue.send_to_dead_letters(lease, reason).await?;
        self.mark_done(lease);
        Ok(())
    }

    async fn park(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError> {
        match self.queue.park_job(lease).await? {
            true => {
                self.mark_done(lease);
                Ok(())
            }
            false => self.defer(lease, delay).await,
        }
    }

    fn parks(&self) -> bool {
        self.queue.parks()
    }

    fn attempts_from_history(&self, lease: &Lease) -> bool {
        in_line(&lease.receipt).is_some()
    }

    async fn unpark(&self, subscription: &SubscriptionId) -> Result<usize, QueueError> {
        self.queue.unpark_all(subscription).await
    }
}
