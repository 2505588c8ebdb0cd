//! The delivery history port: every notification from the moment ingestion
//! enqueues it (`PENDING`) to its end (`DELIVERED` or `FAILED`), and every
//! attempt made to deliver it. Written by ingestion (the outbox) and by the
//! delivery pipeline (`delivery::deliver`), read by the history endpoints
//! ([`crate::api::notifications`]).
//!
//! Adapters: [`crate::sqlite`] (table `notifications`, attempts inline)
//! and [`crate::aws::dynamodb`] (items in the messages table). Both pass the
//! conformance suite (`shared/tests/support/conformance/history.rs`).

pub mod stats;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::ids::{NotificationId, OrgId, SubscriptionId};
use crate::model::Page;
use crate::page::{Order, PageRequest};
use crate::queue::DeliveryJob;
pub use crate::queue::Trigger;
use crate::store::StoreError;

/// At most this much of a callback's answer is kept with an attempt.
pub const MAX_KEPT_RESPONSE: usize = 4 * 1024;

/// Where a notification stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum NotificationStatus {
    /// Enqueued: waiting for its first attempt or a retry.
    Pending,
    /// A callback answered 2xx.
    Delivered,
    /// The service gave up: schedule exhausted, 410, blacklisted or inactive subscription.
    Failed,
}

impl NotificationStatus {
    /// The wire name: `PENDING`, `DELIVERED` or `FAILED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Delivered => "DELIVERED",
            Self::Failed => "FAILED",
        }
    }

    /// The status of a wire name, in any case; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Pending, Self::Delivered, Self::Failed]
            .into_iter()
            .find(|v| v.as_str().eq_ignore_ascii_case(s))
    }
}

/// A notification as listed: what happened to it so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationSummary {
    /// The notification's `uuid` (also its `webhook-id`).
    pub id: NotificationId,
    /// The subscription it goes to.
    pub subscription_id: SubscriptionId,
    /// The id of the event it notifies.
    pub event_id: String,
    /// The filter that matched (the payload's `event`).
    pub event: String,
    /// Epoch ms; also the payload's `timestamp`.
    pub created_at: i64,
    /// Where it stands now.
    pub status: NotificationStatus,
    /// Attempts made so far (resends included).
    pub attempts: u32,
    /// When the latest attempt started (epoch ms); None before the first.
    pub last_attempt_at: Option<i64>,
    /// When the next scheduled attempt is due (epoch ms, `PENDING` only).
    pub next_attempt_at: Option<i64>,
    /// The callback's status for the latest attempt; None when nothing answered.
    pub last_http_status: Option<u16>,
    /// Why the latest attempt failed, or why it ended unsent; None after a success.
    pub last_code: Option<String>,
}

/// One attempt to deliver a notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// Epoch ms when the POST started.
    pub at: i64,
    /// How long the POST took, ms.
    pub duration_ms: u64,
    /// None when nothing answered.
    pub http_status: Option<u16>,
    /// None on success; else the failing step (`CONNECT_FAILED`, `BAD_STATUS`, ...).
    pub code: Option<String>,
    /// The first [`MAX_KEPT_RESPONSE`] bytes of the answer, as text.
    pub response_body: String,
    /// Whether the schedule or a person (resend, recover) asked for it.
    pub trigger: Trigger,
}

impl AttemptRecord {
    /// The callback answered 2xx (no failing step).
    pub fn succeeded(&self) -> bool {
        self.code.is_none()
    }
}

/// A notification with its payload and every attempt, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationDetail {
    /// What the list shows of it.
    pub summary: NotificationSummary,
    /// The exact JSON body that is sent.
    pub payload: String,
    /// Every attempt, oldest first.
    pub attempts: Vec<AttemptRecord>,
    /// The trace the notification belongs to (32 hex digits); None for a
    /// notification stored before traces were kept.
    pub trace_id: Option<String>,
}

/// What a notification became after an attempt (or a decision not to send).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Where it stands after this.
    pub status: NotificationStatus,
    /// When the next scheduled attempt is due (PENDING only).
    pub next_attempt_at: Option<i64>,
    /// The attempt, when a call was made (or refused by the address policy).
    pub attempt: Option<AttemptRecord>,
    /// Why it ended without an attempt (e.g. `SUBSCRIPTION_NOT_ACTIVE`).
    pub code: Option<String>,
}

/// Which notifications a list or a count is about.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Window {
    /// Only these statuses; empty means all.
    pub statuses: Vec<NotificationStatus>,
    /// `created_at >= since` (epoch ms).
    pub since: i64,
    /// `created_at < until` (epoch ms).
    pub until: i64,
}

/// A notification to send again (resend, recover): its job, MANUAL, and
/// its state as read, which [`DeliveryHistory::mark_pending`] checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The job that sends it again.
    pub job: DeliveryJob,
    /// Its status as read; the claim fails if it changed meanwhile.
    pub status: NotificationStatus,
    /// Its attempts as read; the claim fails if another was made meanwhile.
    pub attempts: u32,
}

/// One notification's figures for the stats endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsRow {
    /// When the notification was created (epoch ms): the hour it counts in.
    pub created_at: i64,
    /// Where it stands.
    pub status: NotificationStatus,
    /// Attempts made (more than 1: retried).
    pub attempts: u32,
    /// Durations of its attempts (ms); adapters may keep only the latest few.
    pub durations_ms: Vec<u64>,
}

/// The `event` (matched filter) of a notification payload, for the list.
pub fn event_of(payload: &str) -> String {
    #[derive(Deserialize)]
    struct Head {
        #[serde(default)]
        event: String,
    }
    serde_json::from_str::<Head>(payload)
        .map(|h| h.event)
        .unwrap_or_default()
}

/// The list's order when the caller asks for none: newest first.
pub const DEFAULT_ORDER: &[Order] = &[
    Order {
        property: "createdDateTime",
        ascending: false,
        ignore_case: false,
    },
    Order {
        property: "uuid",
        ascending: false,
        ignore_case: false,
    },
];

/// Compares two summaries by a sortable property (for adapters that sort
/// in memory; SQLite sorts in SQL the same way).
pub fn compare(
    a: &NotificationSummary,
    b: &NotificationSummary,
    property: &str,
    _ignore_case: bool,
) -> std::cmp::Ordering {
    match property {
        "createdDateTime" => a.created_at.cmp(&b.created_at),
        "status" => a.status.as_str().cmp(b.status.as_str()),
        "attempts" => a.attempts.cmp(&b.attempts),
        "lastAttemptTime" => a.last_attempt_at.cmp(&b.last_attempt_at),
        "nextAttemptTime" => a.next_attempt_at.cmp(&b.next_attempt_at),
        "uuid" => a.id.cmp(&b.id),
        _ => std::cmp::Ordering::Equal,
    }
}

/// The sortable properties of a notification list, as the API names them.
pub const SORTABLE: &[&str] = &[
    "createdDateTime",
    "status",
    "attempts",
    "lastAttemptTime",
    "nextAttemptTime",
];

/// The delivery history port: every notification and attempt, for the history endpoints.
#[async_trait]
pub trait DeliveryHistory: Send + Sync {
    /// Records notifications just enqueued as PENDING (idempotent: a
    /// notification already recorded is left as it is).
    async fn record_enqueued(&self, event_id: &str, jobs: &[DeliveryJob])
        -> Result<(), StoreError>;

    /// Records what an attempt (or a decision not to send) did to the job's
    /// notification. Called before the queue is settled, so a crash repeats
    /// the attempt rather than losing its outcome.
    async fn record_outcome(&self, job: &DeliveryJob, outcome: &Outcome) -> Result<(), StoreError>;

    /// A page of a subscription's notifications in `window`, sorted as
    /// `page` asks (newest first by default). The handlers clamp windows to
    /// the retention, so history past it is not shown even before a purge.
    async fn list(
        &self,
        org_id: &OrgId,
        subscription_id: &SubscriptionId,
        window: &Window,
        page: &PageRequest,
    ) -> Result<Page<NotificationSummary>, StoreError>;

    /// One notification of the subscription, with payload and attempts.
    async fn get(
        &self,
        org_id: &OrgId,
        subscription_id: &SubscriptionId,
        id: &NotificationId,
    ) -> Result<Option<NotificationDetail>, StoreError>;

    /// The summary of the job's notification (status, attempts, next
    /// attempt), read strongly consistent: what an ordered lease numbers its
    /// attempt from (`delivery::deliver`). By default through [`Self::get`];
    /// an adapter with a cheaper read of the summary alone overrides it.
    async fn summary_of(
        &self,
        job: &DeliveryJob,
    ) -> Result<Option<NotificationSummary>, StoreError> {
        let detail = self.get(&job.org_id, &job.subscription_id, &job.id).await?;
        Ok(detail.map(|d| d.summary))
    }

    /// The figures of every notification of the subscription created in the window.
    async fn stats_rows(
        &self,
        org_id: &OrgId,
        subscription_id: &SubscriptionId,
        since: i64,
        until: i64,
    ) -> Result<Vec<StatsRow>, StoreError>;

    /// Up to `max` notifications of the subscription in `window`, oldest
    /// first, ready to be sent again.
    async fn claims(
        &self,
        org_id: &OrgId,
        subscription_id: &SubscriptionId,
        window: &Window,
        max: usize,
    ) -> Result<Vec<Claim>, StoreError>;

    /// Marks each claimed notification PENDING, due at `now`, if it is still
    /// as read (status and attempt count): a second recover does not double
    /// it, and an attempt recorded meanwhile wins. Returns how many changed.
    async fn mark_pending(&self, claims: &[Claim], now: i64) -> Result<usize, StoreError>;

    /// Deletes history created before `before`; returns how many
    /// notifications went. (DynamoDB's TTL does this by itself.)
    async fn purge(&self, before: i64) -> Result<u64, StoreError>;
}
