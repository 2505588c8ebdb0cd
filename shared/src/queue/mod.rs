//! The delivery queue port and the ingestion outbox.
//!
//! Adapters: the SQLite file ([`crate::sqlite`], a durable queue table
//! beside the store) and SQS ([`crate::aws::sqs`], [`crate::aws::outbox`]).
//! Consumers lease jobs and hand each to `delivery::deliver`, which
//! completes, retries later, or dead-letters it.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::ids::{NotificationId, OrgId, SubscriptionId};
use crate::model::Message;
use crate::store::{Cause, StoreError};

/// One notification to deliver: the rendered body travels with the job so
/// every attempt sends the same bytes; uri and secret are read at delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryJob {
    /// The notification `uuid` (also `webhook-id`).
    pub id: NotificationId,
    /// `orgId`: the subscription's organization.
    #[serde(rename = "orgId")]
    pub org_id: OrgId,
    /// `subscriptionId`: the subscription to deliver to.
    #[serde(rename = "subscriptionId")]
    pub subscription_id: SubscriptionId,
    /// The JSON payload, exactly as it is POSTed.
    pub body: String,
    /// When the notification was created (epoch ms, the payload's
    /// `timestamp`): the delivery history is ordered, and keyed, by it.
    #[serde(rename = "createdAt", default)]
    pub created_at: i64,
    /// MANUAL for a resend or recover: its first attempt is recorded so.
    #[serde(default, skip_serializing_if = "Trigger::is_scheduled")]
    pub trigger: Trigger,
    /// The W3C `traceparent` of the ingestion that created it: its
    /// attempts are spans of that trace and the callback's POST carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// Attempts made before this message was sent (a queue that carries
    /// a retry as a new message, SQS; 0 elsewhere).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: u32,
    /// Not to be attempted before this time (epoch ms): a wait longer than
    /// the queue can delay one message (SQS: 15 minutes) goes in hops.
    #[serde(rename = "notBefore", default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<i64>,
    /// `ordered`: its subscription delivers in acceptance order, so the job
    /// goes where the queue keeps a line per subscription (SQS: the FIFO
    /// delivery queue). Absent (false) on jobs written before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ordered: bool,
    /// `historyAttempts`: the attempts the delivery history counted when this
    /// job was made (a resend or recover: those before it; 0 for a new
    /// notification). A queue whose message is not sent again for a retry
    /// (the FIFO queue) numbers an attempt from the history: its count now
    /// minus this, plus one ([`DeliveryQueue::attempts_from_history`]).
    #[serde(rename = "historyAttempts", default, skip_serializing_if = "is_zero")]
    pub history_attempts: u32,
}

impl DeliveryJob {
    /// A new notification's job: scheduled, nothing attempted yet.
    pub fn new(
        id: NotificationId,
        org_id: OrgId,
        subscription_id: SubscriptionId,
        body: String,
        created_at: i64,
    ) -> Self {
        DeliveryJob {
            id,
            org_id,
            subscription_id,
            body,
            created_at,
            trigger: Trigger::Scheduled,
            attempts: 0,
            not_before: None,
            traceparent: None,
            ordered: false,
            history_attempts: 0,
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Who asked for an attempt: the retry schedule, or a person (resend, recover).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Trigger {
    /// The first attempt and the retries of the schedule.
    #[default]
    Scheduled,
    /// The first attempt after a resend or a recover.
    Manual,
}

impl Trigger {
    /// The wire name: `SCHEDULED` or `MANUAL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "SCHEDULED",
            Self::Manual => "MANUAL",
        }
    }

    /// None for a value this version does not know (a corrupt item).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "SCHEDULED" => Some(Self::Scheduled),
            "MANUAL" => Some(Self::Manual),
            _ => None,
        }
    }

    /// The schedule asked for it.
    pub fn is_scheduled(&self) -> bool {
        *self == Self::Scheduled
    }
}

/// A job taken from the queue, invisible to other consumers until its lease
/// runs out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The job leased.
    pub job: DeliveryJob,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// Adapter-specific handle (SQS receipt handle, SQLite lease number).
    pub receipt: String,
    /// The rate-limit slot the queue took with the lease (epoch ms), where
    /// the queue keeps the limit itself (SQLite,
    /// [`DeliveryQueue::limits_rate`]): the delivery starts then.
    pub slot: Option<i64>,
}

/// Why a queue call failed; the cause is kept as the `source` and shown in
/// the message (see [`StoreError`]).
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The queue timed out, was throttled, busy or could not be reached: the
    /// same call may succeed later (an API answers `503 QUEUE_UNAVAILABLE`).
    #[error("queue unavailable: {0}")]
    Unavailable(#[source] Cause),
    /// A job on the queue this version cannot read, named by its key.
    #[error("queued job {key} is corrupt: {problem}")]
    Corrupt {
        /// The job's key, as the adapter names it.
        key: String,
        /// What cannot be read.
        problem: String,
    },
    /// Any other failure of the queue.
    #[error("queue failure: {0}")]
    Backend(#[source] Cause),
}

impl QueueError {
    /// [`QueueError::Backend`] with `cause`.
    pub fn backend(cause: impl Into<Cause>) -> Self {
        QueueError::Backend(cause.into())
    }

    /// [`QueueError::Unavailable`] with `cause`.
    pub fn unavailable(cause: impl Into<Cause>) -> Self {
        QueueError::Unavailable(cause.into())
    }

    /// The queue may answer later (`503 QUEUE_UNAVAILABLE`).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, QueueError::Unavailable(_))
    }
}

/// A queue kept in a store (the SQLite queue table, DynamoDB's parking
/// lot) fails as its store does: unavailable stays unavailable, and a
/// corrupt item keeps its key.
impl From<StoreError> for QueueError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Corrupt { key, problem } => QueueError::Corrupt { key, problem },
            e if e.is_unavailable() => QueueError::Unavailable(Box::new(e)),
            e => QueueError::Backend(Box::new(e)),
        }
    }
}

/// A failure of work that writes to both the store and the queue (an
/// outbox commit; a delivery's record and settle): which of the two failed,
/// so logs and answers name the right part.
#[derive(Debug, thiserror::Error)]
pub enum StoreOrQueueError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The queue failed.
    #[error(transparent)]
    Queue(#[from] QueueError),
}

impl StoreOrQueueError {
    /// `store` or `queue`, the `part` field of a log line.
    pub fn part(&self) -> &'static str {
        match self {
            StoreOrQueueError::Store(_) => "store",
            StoreOrQueueError::Queue(_) => "queue",
        }
    }
}

/// The delivery queue port: jobs enqueued by ingestion, leased by delivery workers.
#[async_trait]
pub trait DeliveryQueue: Send + Sync {
    /// Adds the jobs, each due at once or at its `not_before`.
    async fn enqueue(&self, jobs: Vec<DeliveryJob>) -> Result<(), QueueError>;
    /// Leases up to `max` due jobs for `visibility`, fairly across
    /// subscriptions and at most `per_subscription` leases held at once for
    /// one subscription, where the adapter can tell (SQLite); where it
    /// cannot (SQS), the pipeline defers what is over the cap.
    async fn receive(
        &self,
        max: usize,
        per_subscription: usize,
        visibility: Duration,
    ) -> Result<Vec<Lease>, QueueError>;
    /// Delivered (or dropped for good): remove it.
    async fn complete(&self, lease: &Lease) -> Result<(), QueueError>;
    /// The attempt failed: make it due again after `delay` (its next
    /// lease is the next attempt).
    async fn retry_after(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError>;
    /// Not attempted: make it due again after `delay`, with no attempt
    /// counted (its next lease has the same attempt number).
    async fn defer(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError>;
    /// Give up: move it to the dead letters with the reason.
    async fn dead_letter(&self, lease: &Lease, reason: &str) -> Result<(), QueueError>;
    /// Not attempted, its subscription's breaker open: keep it out of the
    /// queue until [`DeliveryQueue::unpark`], where each deferral costs
    /// requests (SQS: a dead callback's jobs would otherwise come back
    /// every cool-down). A queue whose deferral is a row update defers it
    /// to `delay` instead (the default).
    async fn park(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError> {
        self.defer(lease, delay).await
    }
    /// Whether [`DeliveryQueue::receive`] itself keeps each subscription
    /// within `per_subscription` leases (SQLite); otherwise the pipeline
    /// counts calls in flight and defers what is over (SQS).
    fn caps_leases(&self) -> bool {
        false
    }
    /// Whether [`DeliveryQueue::receive`] itself keeps each subscription
    /// within its rate limit (SQLite: the lease takes a rate slot for each
    /// job, [`Lease::slot`]); otherwise the pipeline reserves each attempt's
    /// slot in the store and defers a job that has none (SQS).
    fn limits_rate(&self) -> bool {
        false
    }
    /// Whether [`DeliveryQueue::park`] parks (true) or defers.
    fn parks(&self) -> bool {
        false
    }
    /// Whether a settled delivery may make a job leasable at once, so the
    /// polling loop leases again right away instead of at its next poll: a
    /// queue that caps leases (SQLite), or a line's next job (SQS FIFO).
    fn wakes_on_settle(&self) -> bool {
        self.caps_leases()
    }
    /// Whether the lease's attempt number is to be read from the delivery
    /// history ([`DeliveryJob::history_attempts`]) rather than trusted: a
    /// queue that keeps a retry in place instead of sending it again (SQS
    /// FIFO), where the message cannot carry its attempts and SQS's receive
    /// count also counts deferrals. The pipeline reads the notification's
    /// summary once for such a lease (`delivery::deliver`).
    fn attempts_from_history(&self, _lease: &Lease) -> bool {
        false
    }
    /// Puts the parked jobs of a subscription back in the queue, due now;
    /// returns how many.
    async fn unpark(&self, _subscription: &SubscriptionId) -> Result<usize, QueueError> {
        Ok(0)
    }
    /// The backlog, for the metrics' gauges: None where the queue cannot
    /// tell cheaply (SQS publishes its own figures to CloudWatch).
    async fn backlog(&self) -> Result<Option<Backlog>, QueueError> {
        Ok(None)
    }
}

/// Where a queue parks jobs ([`DeliveryQueue::park`]): durable, read per
/// subscription, oldest first. Adapter: DynamoDB (`aws/dynamodb/parking.rs`).
#[async_trait]
pub trait ParkingLot: Send + Sync {
    /// Keeps `job` until its subscription's breaker closes.
    async fn park(&self, job: &DeliveryJob) -> Result<(), QueueError>;
    /// Up to `max` parked jobs of the subscription, oldest first.
    async fn parked(
        &self,
        subscription: &SubscriptionId,
        max: usize,
    ) -> Result<Vec<DeliveryJob>, QueueError>;
    /// Forgets these parked jobs (they are back in the queue).
    async fn release(
        &self,
        subscription: &SubscriptionId,
        jobs: &[DeliveryJob],
    ) -> Result<(), QueueError>;
}

/// A queue's backlog, as the metrics' gauges show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Backlog {
    /// Jobs due now and not leased.
    pub due: u64,
    /// How long the oldest of them has been due (zero when none is).
    pub oldest_due_age: Duration,
}

/// Where an ingested event's effects go: the event id (for deduplication),
/// its message, and its notifications.
#[async_trait]
pub trait Outbox: Send + Sync {
    /// Records the event, stores the message and enqueues the jobs. Returns
    /// false, doing nothing, when the event id was recorded before.
    async fn commit(
        &self,
        org_id: &OrgId,
        event_id: &str,
        message: Option<&Message>,
        jobs: Vec<DeliveryJob>,
    ) -> Result<bool, StoreOrQueueError>;

    /// [`Outbox::commit`] of each event of a batch (an SQS batch of the
    /// events queue), one outcome per event, in order. An adapter may share
    /// calls between the events (SQS: all their jobs in as few
    /// `SendMessageBatch` calls as its limits allow) but keeps each event's
    /// guarantees: an event is recorded only once every one of its jobs is
    /// queued, and an event id repeated in the batch is a duplicate of its
    /// first. By default, one commit after another.
    async fn commit_all(&self, events: Vec<EventCommit>) -> Vec<Result<bool, StoreOrQueueError>> {
        let mut outcomes = Vec::with_capacity(events.len());
        for e in events {
            outcomes.push(
                self.commit(&e.org_id, &e.event_id, e.message.as_ref(), e.jobs)
                    .await,
            );
        }
        outcomes
    }
}

/// One event's effects, for [`Outbox::commit_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventCommit {
    /// The event's organization.
    pub org_id: OrgId,
    /// The event's id: the second commit of an id does nothing.
    pub event_id: String,
    /// The message the event carries, stored for `getmessagebyid`.
    pub message: Option<Message>,
    /// Its notifications, one per matching subscription.
    pub jobs: Vec<DeliveryJob>,
    /// When the event was first accepted, as it carries it (the events
    /// queue's `SentTimestamp`): its jobs are dated and named by it, so a
    /// redelivery repeats them and the AWS outbox keeps no event record.
    /// `None`: the outbox records the event (a `POST`, a notice).
    pub accepted_at: Option<i64>,
    /// Handed over before by SQS: the AWS outbox reads the record a version
    /// that recorded every event may have left (docs/operations.md#upgrades).
    pub redelivered: bool,
}
