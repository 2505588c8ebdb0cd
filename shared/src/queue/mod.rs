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
use crate::store::StoreError;

/// One notification to deliver: the rendered body travels with the job so
/// every attempt sends the same bytes; uri and secret are read at delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryJob {
    /// The notification `uuid` (also `webhook-id`).
    pub id: NotificationId,
    #[serde(rename = "orgId")]
    pub org_id: OrgId,
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
}

/// Who asked for an attempt: the retry schedule, or a person (resend, recover).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Trigger {
    #[default]
    Scheduled,
    Manual,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "SCHEDULED",
            Self::Manual => "MANUAL",
        }
    }

    pub fn parse(s: &str) -> Self {
        if s == "MANUAL" {
            Self::Manual
        } else {
            Self::Scheduled
        }
    }

    pub fn is_scheduled(&self) -> bool {
        *self == Self::Scheduled
    }
}

/// A job taken from the queue, invisible to other consumers until its lease
/// runs out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub job: DeliveryJob,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// Adapter-specific handle (SQS receipt handle, SQLite lease number).
    pub receipt: String,
}

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("queue failure: {0}")]
    Backend(String),
    /// The queue timed out, was throttled or could not be reached: the same
    /// call may succeed later (an API answers `503 QUEUE_UNAVAILABLE`).
    #[error("queue unavailable: {0}")]
    Unavailable(String),
}

impl QueueError {
    pub fn backend(detail: impl std::fmt::Display) -> Self {
        QueueError::Backend(detail.to_string())
    }

    pub fn unavailable(detail: impl std::fmt::Display) -> Self {
        QueueError::Unavailable(detail.to_string())
    }

    pub fn is_unavailable(&self) -> bool {
        matches!(self, QueueError::Unavailable(_))
    }
}

#[async_trait]
pub trait DeliveryQueue: Send + Sync {
    async fn enqueue(&self, jobs: Vec<DeliveryJob>) -> Result<(), QueueError>;
    /// Leases up to `max` due jobs for `visibility`.
    async fn receive(&self, max: usize, visibility: Duration) -> Result<Vec<Lease>, QueueError>;
    /// Delivered (or dropped for good): remove it.
    async fn complete(&self, lease: &Lease) -> Result<(), QueueError>;
    /// Make it due again after `delay`.
    async fn retry_after(&self, lease: &Lease, delay: Duration) -> Result<(), QueueError>;
    /// Give up: move it to the dead letters with the reason.
    async fn dead_letter(&self, lease: &Lease, reason: &str) -> Result<(), QueueError>;
    /// The backlog, for the metrics' gauges: None where the queue cannot
    /// tell cheaply (SQS publishes its own figures to CloudWatch).
    async fn backlog(&self) -> Result<Option<Backlog>, QueueError> {
        Ok(None)
    }
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
    ) -> Result<bool, StoreError>;
}
