//! The store port: subscriptions (with their filter index) and messages.
//! Adapters: [`crate::sqlite`] (embedded, default for local runs) and
//! [`crate::aws::dynamodb`]. Every adapter passes the same conformance suite
//! (`shared/tests/support/conformance`).

pub mod order;
pub mod rules;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::custom_headers::CustomHeaders;
use crate::health::rate::Reserved;
use crate::health::Health;
use crate::ids::{OrgId, SubscriptionId};
use crate::model::{Message, Page, SubscriptionStatus};
use crate::page::PageRequest;
use crate::payload_filter::PayloadFilter;
use crate::retry_schedule::RetrySchedule;

/// A subscription as stored, including its signing secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSubscription {
    /// Its id, a UUID v7 assigned on create.
    pub id: SubscriptionId,
    /// The organization that owns it.
    pub org_id: OrgId,
    /// The callback URL; unique within the organization.
    pub uri: String,
    /// Canonical filter strings, enabled for delivery.
    pub event_filters: Vec<String>,
    /// The filters asked for that the organization may not use.
    pub disabled_filters: Vec<DisabledEntry>,
    /// Epoch milliseconds.
    pub expires_at: i64,
    /// As stored: `Active` or `Blacklisted` (expiry is seen at read, [`order::visible_status`]).
    pub status: SubscriptionStatus,
    /// When it was created (epoch ms).
    pub created_at: i64,
    /// When it was last posted or its secret rotated (epoch ms).
    pub updated_at: i64,
    /// The current signing secret (`whsec_...`).
    pub secret: String,
    /// Secrets replaced by a rotation whose grace period has not ended yet
    /// (at most [`MAX_PREVIOUS_SECRETS`]), oldest first: notifications are
    /// signed with the current secret and with each of these.
    pub previous_secrets: Vec<PreviousSecret>,
    /// Start of the current run of failed deliveries (epoch ms), if any.
    pub failing_since: Option<i64>,
    /// Its circuit breaker ([`crate::health::breaker`]); cleared when the
    /// subscription is re-posted.
    pub health: Health,
    /// Delivered in acceptance order, one at a time (`ordered`).
    pub ordered: bool,
    /// Its rate limit, notifications per second (`rateLimit`); None: unlimited.
    pub rate_limit: Option<u32>,
    /// The role assumed to reach an AWS destination (its `uri` is then the
    /// destination's ARN); None for an HTTPS callback.
    pub role_arn: Option<String>,
    /// The external id an AWS destination was validated with: one that
    /// differs from the service's now is the service's fault (its prefix
    /// changed), not the customer's. None for a callback, and for
    /// destinations validated before it was recorded.
    pub external_id: Option<String>,
    /// Its payload filter (`payloadFilter`): fan-out skips the events it
    /// refuses. Kept on the filter index's copies too (DynamoDB), so
    /// fan-out reads nothing more.
    pub payload_filter: Option<PayloadFilter>,
    /// Its own retry schedule (`retrySchedule`), in place of the
    /// deployment's; none: the deployment's.
    pub retry_schedule: Option<RetrySchedule>,
    /// Its own headers (`customHeaders`), sent on every POST; secrets.
    pub custom_headers: Option<CustomHeaders>,
}

#[cfg(test)]
impl StoredSubscription {
    /// An active callback subscription of `org_id`, for unit tests.
    pub(crate) fn example(id: &str, org_id: &str) -> StoredSubscription {
        StoredSubscription {
            id: id.into(),
            org_id: org_id.into(),
            uri: "https://example.com/hook".into(),
            event_filters: vec![format!("/orgId/{org_id}/department/d/contact")],
            disabled_filters: vec![],
            expires_at: 5_000,
            status: crate::model::SubscriptionStatus::Active,
            created_at: 1,
            updated_at: 2,
            secret: "whsec_x".into(),
            previous_secrets: vec![],
            failing_since: None,
            health: Default::default(),
            ordered: false,
            rate_limit: None,
            role_arn: None,
            external_id: None,
            payload_filter: None,
            retry_schedule: None,
            custom_headers: None,
        }
    }
}

impl StoredSubscription {
    /// The secrets notifications are signed with at `now`: the current one
    /// first, then every previous one whose grace period has not ended.
    pub fn signing_secrets(&self, now: i64) -> impl Iterator<Item = &str> {
        std::iter::once(self.secret.as_str()).chain(
            self.previous_secrets
                .iter()
                .filter(move |p| p.expires_at > now)
                .map(|p| p.secret.as_str()),
        )
    }

    /// The waits after its failed attempts: its own schedule, or else the
    /// deployment's (`WEBHOOKS_RETRY_SCHEDULE`).
    pub fn retry_waits<'a>(
        &'a self,
        deployment: &'a [std::time::Duration],
    ) -> &'a [std::time::Duration] {
        self.retry_schedule
            .as_ref()
            .map_or(deployment, RetrySchedule::waits)
    }
}

/// A signing secret replaced by a rotation, still valid until `expires_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviousSecret {
    /// The replaced secret (`whsec_...`).
    pub secret: String,
    /// Epoch milliseconds: the end of its grace period.
    #[serde(rename = "expiresAt")]
    pub expires_at: i64,
}

/// At most this many replaced secrets are valid at once.
pub const MAX_PREVIOUS_SECRETS: usize = 10;

/// The default grace period of a replaced secret, in seconds: a day (a
/// rotation's, and a signature scheme switch's).
pub const DEFAULT_GRACE_SECONDS: i64 = 86_400;

/// A signing-secret rotation: `new_secret` becomes the current secret; the
/// current one stays valid for `grace_ms` more (not at all when 0).
#[derive(Debug, Clone)]
pub struct SecretRotation {
    /// The secret that becomes current (`whsec_...`).
    pub new_secret: String,
    /// How long the replaced secret stays valid, ms (0: not at all).
    pub grace_ms: i64,
    /// When the rotation happens (epoch ms): the grace period starts then.
    pub now: i64,
}

impl SecretRotation {
    /// `sub` after this rotation: the new secret, and as previous secrets
    /// the unexpired ones plus the current one (when it gets a grace period).
    /// Fails when that would be more than [`MAX_PREVIOUS_SECRETS`], or when
    /// the new secret is one of them or the current one. Every adapter
    /// applies this rule and writes what it answers.
    pub fn apply(&self, sub: &StoredSubscription) -> Result<StoredSubscription, StoreError> {
        Ok(StoredSubscription {
            secret: self.new_secret.clone(),
            previous_secrets: self.previous_after(sub)?,
            updated_at: self.now,
            ..sub.clone()
        })
    }

    fn previous_after(&self, sub: &StoredSubscription) -> Result<Vec<PreviousSecret>, StoreError> {
        let mut kept: Vec<PreviousSecret> = sub
            .previous_secrets
            .iter()
            .filter(|p| p.expires_at > self.now)
            .cloned()
            .collect();
        let reused = std::iter::once(sub.secret.as_str())
            .chain(kept.iter().map(|p| p.secret.as_str()))
            .fold(0u8, |acc, old| {
                acc | subtle::ConstantTimeEq::ct_eq(old.as_bytes(), self.new_secret.as_bytes())
                    .unwrap_u8()
            });
        if reused == 1 {
            return Err(StoreError::SecretReused);
        }
        if self.grace_ms > 0 {
            kept.push(PreviousSecret {
                secret: sub.secret.clone(),
                expires_at: self.now.saturating_add(self.grace_ms),
            });
        }
        if kept.len() > MAX_PREVIOUS_SECRETS {
            return Err(StoreError::TooManySecrets(MAX_PREVIOUS_SECRETS));
        }
        Ok(kept)
    }
}

/// What a delivery attempt did, for the subscription's bookkeeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryRecord {
    /// A 2xx: the failure streak ends.
    Succeeded,
    /// A failure at `now`: starts the streak, or blacklists when the streak
    /// is older than `blacklist_after_ms`.
    Failed {
        /// When the attempt failed (epoch ms).
        now: i64,
        /// `WEBHOOKS_BLACKLIST_AFTER`, ms: how long a streak may last.
        blacklist_after_ms: i64,
    },
    /// `410 Gone`: blacklisted at once.
    Gone,
}

/// A requested filter the caller may not use, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisabledEntry {
    /// The filter as asked for.
    pub filter: String,
    /// Why it is disabled (`PERMISSION_DENIED`).
    pub reason: String,
    /// The reason, for a person.
    pub message: String,
}

/// Create-or-update of the subscription identified by (`org_id`, `uri`).
/// `new_id` and `new_secret` are used only when it does not exist yet.
#[derive(Debug, Clone)]
pub struct Upsert {
    /// The organization the subscription belongs to.
    pub org_id: OrgId,
    /// The callback URL: with `org_id`, what identifies the subscription.
    pub uri: String,
    /// The enabled filters, in canonical form.
    pub event_filters: Vec<String>,
    /// The filters asked for that the organization may not use.
    pub disabled_filters: Vec<DisabledEntry>,
    /// The expiry (epoch ms).
    pub expires_at: i64,
    /// When this write happens (epoch ms): `created_at` of a new one, `updated_at` of either.
    pub now: i64,
    /// The id of a new subscription (an existing one keeps its own).
    pub new_id: SubscriptionId,
    /// The signing secret of a new subscription (an existing one keeps its own).
    pub new_secret: String,
    /// Creating past this many subscriptions in the organization fails.
    pub max_per_org: usize,
    /// Ordered delivery: set when Some, false for a new one when None
    /// (an update that does not mention it keeps it).
    pub ordered: Option<bool>,
    /// The rate limit to store: `Some(limit)` sets it (`Some(None)`: none),
    /// `None` keeps an existing subscription's (a new one has none).
    pub rate_limit: Option<Option<u32>>,
    /// The role of an AWS destination (`uri` its ARN), replacing the stored
    /// one; None for an HTTPS callback.
    pub role_arn: Option<String>,
    /// The external id it was validated with, replacing the stored one.
    pub external_id: Option<String>,
    /// The payload filter: `Some(filter)` sets it (`Some(None)`: none),
    /// `None` keeps an existing subscription's (a new one has none).
    pub payload_filter: Option<Option<PayloadFilter>>,
    /// The retry schedule: `Some(schedule)` sets it (`Some(None)`: the
    /// deployment's), `None` keeps an existing subscription's.
    pub retry_schedule: Option<Option<RetrySchedule>>,
    /// The custom headers: `Some(headers)` sets them (`Some(None)`: none),
    /// `None` keeps an existing subscription's (a new one has none).
    pub custom_headers: Option<Option<CustomHeaders>>,
}

/// The cause a store or queue failure keeps: the adapter's own error
/// (rusqlite's, the AWS SDK's, serde's) or a message where there is none.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a store call failed. The cause is kept as the `source` and also
/// shown in the message, so one log field (`error = %e`) tells the whole
/// story.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Creating one more subscription would pass the organization's limit.
    #[error("the organization already has {0} subscriptions")]
    LimitReached(usize),
    /// A rotation would leave more than this many previous secrets valid.
    #[error("{0} replaced signing secrets are still valid")]
    TooManySecrets(usize),
    /// A rotation's new secret is the current or a still valid previous one.
    #[error("the new signing secret is already one of the subscription's")]
    SecretReused,
    /// The store timed out, was throttled, busy or locked, or could not be
    /// reached: the same call may succeed later (`503 STORE_UNAVAILABLE`).
    #[error("store unavailable: {0}")]
    Unavailable(#[source] Cause),
    /// Concurrent writes kept cancelling this one: it may succeed later
    /// (`503 STORE_UNAVAILABLE`).
    #[error("store conflict: {0}")]
    Conflict(String),
    /// A stored item this version cannot read (a missing attribute, an
    /// unknown status): named by its key so an operator can find it.
    #[error("stored item {key} is corrupt: {problem}")]
    Corrupt {
        /// The item's key, as the adapter names it.
        key: String,
        /// What cannot be read.
        problem: String,
    },
    /// Any other failure: a refused request, a missing table, a full disk.
    #[error("store failure: {0}")]
    Backend(#[source] Cause),
}

impl StoreError {
    /// [`StoreError::Backend`] with `cause`.
    pub fn backend(cause: impl Into<Cause>) -> Self {
        StoreError::Backend(cause.into())
    }

    /// [`StoreError::Unavailable`] with `cause`.
    pub fn unavailable(cause: impl Into<Cause>) -> Self {
        StoreError::Unavailable(cause.into())
    }

    /// [`StoreError::Corrupt`]: the item at `key` cannot be read because of `problem`.
    pub fn corrupt(key: impl Into<String>, problem: impl Into<String>) -> Self {
        StoreError::Corrupt {
            key: key.into(),
            problem: problem.into(),
        }
    }

    /// Whether the same call may succeed later.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_) | StoreError::Conflict(_))
    }

    /// What kind of failure it is, as metrics label it (`kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::LimitReached(_) => "limit_reached",
            StoreError::TooManySecrets(_) => "too_many_secrets",
            StoreError::SecretReused => "secret_reused",
            StoreError::Backend(_) => "backend",
            StoreError::Unavailable(_) => "unavailable",
            StoreError::Conflict(_) => "conflict",
            StoreError::Corrupt { .. } => "corrupt",
        }
    }
}

/// The store port: subscriptions, their filter index, and messages.
#[async_trait]
pub trait Store: Send + Sync {
    /// Creates or updates atomically: concurrent upserts of one (org, uri)
    /// leave exactly one subscription. Returns it and whether it was created.
    /// The status becomes `ACTIVE` (an update reactivates) and the failure
    /// streak is cleared.
    async fn upsert_subscription(
        &self,
        upsert: Upsert,
    ) -> Result<(StoredSubscription, bool), StoreError>;

    /// The organization's subscription `id`, any status; None if it has none such.
    async fn get_subscription(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
    ) -> Result<Option<StoredSubscription>, StoreError>;

    /// One page of the organization's subscriptions, any status, sorted in
    /// the requested order ([`order`]: the properties, the default order and
    /// its tie-break, `ignorecase`, the status as seen at `now`), with the
    /// organization's total. The store sorts and cuts the page; what a page
    /// costs is the adapter's (docs/schemas.md, docs/cost.md).
    async fn list_subscriptions(
        &self,
        org_id: &OrgId,
        page: &PageRequest,
        now: i64,
    ) -> Result<Page<StoredSubscription>, StoreError>;

    /// Deletes it and its filter index entries; false if there was none.
    async fn delete_subscription(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
    ) -> Result<bool, StoreError>;

    /// Subscriptions of any organization holding `filter` as an enabled
    /// filter: a key lookup in the filter index, never a scan. Their
    /// custom headers may be left out (DynamoDB's index copies hold none):
    /// a delivery reads its subscription itself.
    async fn subscriptions_for_filter(
        &self,
        filter: &str,
    ) -> Result<Vec<StoredSubscription>, StoreError>;

    /// Updates delivery bookkeeping; returns the resulting status, or None
    /// if the subscription no longer exists.
    async fn record_delivery(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
        record: DeliveryRecord,
    ) -> Result<Option<SubscriptionStatus>, StoreError>;

    /// Replaces the subscription's [`Health`] with `new` if it is still at
    /// revision `expected_rev` (compare-and-set, so every worker and
    /// instance shares one breaker); false when it changed meanwhile or the
    /// subscription is gone. Nothing else of the subscription changes.
    async fn update_health(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
        expected_rev: u64,
        new: &Health,
    ) -> Result<bool, StoreError>;

    /// Reserves the next slot of `subscription`'s rate limit `limit`
    /// ([`crate::health::rate`]), the first free one from `now` (epoch ms,
    /// the earliest the caller can start), if it is within the horizon: [`Reserved::At`] its time, or [`Reserved::Full`] with the
    /// next free slot, taking nothing. Shared by every process and instance
    /// of the backend (DynamoDB: a conditional write on the subscription's
    /// item); SQLite, whose one process owns the file and whose lease keeps
    /// the limit, keeps it in memory with the lease. `busy`: the caller
    /// last saw the next free slot ahead of `now`, the adapter's first guess.
    async fn reserve_rate_slot(
        &self,
        subscription: &SubscriptionId,
        limit: u32,
        now: i64,
        busy: bool,
    ) -> Result<Reserved, StoreError>;

    /// Rotates the signing secret atomically ([`SecretRotation::apply`]),
    /// also setting `updated_at`; None if the organization has no such
    /// subscription.
    async fn rotate_secret(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
        rotation: SecretRotation,
    ) -> Result<Option<StoredSubscription>, StoreError>;

    /// Stores the message (replacing one with the same id) as received at
    /// `received_at` (epoch ms): it is kept for `WEBHOOKS_MESSAGE_RETENTION`
    /// from then.
    async fn put_message(
        &self,
        org_id: &OrgId,
        message: &Message,
        received_at: i64,
    ) -> Result<(), StoreError>;

    /// The message, unless it was received before `received_since` (the
    /// start of the retention, [`crate::retention::messages_since`]): a
    /// message past its retention is absent even before it is purged.
    async fn get_message(
        &self,
        org_id: &OrgId,
        id: &str,
        received_since: i64,
    ) -> Result<Option<Message>, StoreError>;

    /// Deletes the messages received before `before`; returns how many
    /// went. (DynamoDB's TTL does this by itself.)
    async fn purge_messages(&self, before: i64) -> Result<u64, StoreError>;

    /// Subscriptions (any organization, any status) whose expiry is in
    /// `(after, until]` and whose reminder for that expiry has not been marked
    /// sent, soonest first, at most `limit`: an index lookup, never a scan.
    async fn expiring_subscriptions(
        &self,
        after: i64,
        until: i64,
        limit: usize,
    ) -> Result<Vec<StoredSubscription>, StoreError>;

    /// Marks the reminder for the expiry `expires_at` of this subscription sent,
    /// so `expiring_subscriptions` no longer returns it; idempotent. It does not
    /// affect a later expiry: re-posting the subscription (a new `expires_at`)
    /// re-arms the reminder. A mark for an expiry the subscription no longer
    /// has changes nothing, and a re-post keeping the same `expires_at`
    /// leaves the mark as it is (the reminder is per expiry).
    async fn mark_expiry_reminded(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
        expires_at: i64,
    ) -> Result<(), StoreError>;
}
