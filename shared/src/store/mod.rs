//! The store port: subscriptions (with their filter index) and messages.
//! Adapters: [`crate::sqlite`] (embedded, default for local runs) and
//! [`crate::aws::dynamodb`]. Every adapter passes the same conformance suite
//! (`shared/tests/conformance`).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::ids::{OrgId, SubscriptionId};
use crate::model::{Message, SubscriptionStatus};

/// A subscription as stored, including its signing secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSubscription {
    pub id: SubscriptionId,
    pub org_id: OrgId,
    pub uri: String,
    /// Canonical filter strings, enabled for delivery.
    pub event_filters: Vec<String>,
    pub disabled_filters: Vec<DisabledEntry>,
    /// Epoch milliseconds.
    pub expires_at: i64,
    pub status: SubscriptionStatus,
    pub created_at: i64,
    pub updated_at: i64,
    pub secret: String,
    /// Start of the current run of failed deliveries (epoch ms), if any.
    pub failing_since: Option<i64>,
}

/// What a delivery attempt did, for the subscription's bookkeeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryRecord {
    /// A 2xx: the failure streak ends.
    Succeeded,
    /// A failure at `now`: starts the streak, or blacklists when the streak
    /// is older than `blacklist_after_ms`.
    Failed { now: i64, blacklist_after_ms: i64 },
    /// `410 Gone`: blacklisted at once.
    Gone,
}

/// A requested filter the caller may not use, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisabledEntry {
    pub filter: String,
    pub reason: String,
    pub message: String,
}

/// Create-or-update of the subscription identified by (`org_id`, `uri`).
/// `new_id` and `new_secret` are used only when it does not exist yet.
#[derive(Debug, Clone)]
pub struct Upsert {
    pub org_id: OrgId,
    pub uri: String,
    pub event_filters: Vec<String>,
    pub disabled_filters: Vec<DisabledEntry>,
    pub expires_at: i64,
    pub now: i64,
    pub new_id: SubscriptionId,
    pub new_secret: String,
    /// Creating past this many subscriptions in the organization fails.
    pub max_per_org: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the organization already has {0} subscriptions")]
    LimitReached(usize),
    #[error("store failure: {0}")]
    Backend(String),
}

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

    async fn get_subscription(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
    ) -> Result<Option<StoredSubscription>, StoreError>;

    /// Every subscription of the organization, any status (capped per org).
    async fn list_subscriptions(
        &self,
        org_id: &OrgId,
    ) -> Result<Vec<StoredSubscription>, StoreError>;

    /// Deletes it and its filter index entries; false if there was none.
    async fn delete_subscription(
        &self,
        org_id: &OrgId,
        id: &SubscriptionId,
    ) -> Result<bool, StoreError>;

    /// Subscriptions of any organization holding `filter` as an enabled
    /// filter: a key lookup in the filter index, never a scan.
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

    async fn put_message(&self, org_id: &OrgId, message: &Message) -> Result<(), StoreError>;

    async fn get_message(&self, org_id: &OrgId, id: &str) -> Result<Option<Message>, StoreError>;
}
