//! Prometheus metrics (feature `metrics`, which `webhooks-local` enables;
//! the Lambda functions link none of it). Nothing is counted until
//! [`install`] is called (`WEBHOOKS_METRICS_ADDR` set): until then every
//! hook is one atomic load. [`render`] gives the text exposition of
//! `GET /metrics`.
//!
//! Families (labels from fixed sets only):
//!
//! | name | type | labels |
//! |---|---|---|
//! | `webhooks_http_requests_total` | counter | `route`, `status` |
//! | `webhooks_http_request_duration_seconds` | histogram | `route` |
//! | `webhooks_events_ingested_total` | counter | |
//! | `webhooks_notifications_created_total` | counter | |
//! | `webhooks_delivery_attempts_total` | counter | `outcome` |
//! | `webhooks_delivery_attempt_duration_seconds` | histogram | |
//! | `webhooks_delivery_lag_seconds` | histogram | |
//! | `webhooks_queue_due_jobs` | gauge | |
//! | `webhooks_queue_oldest_due_age_seconds` | gauge | |
//! | `webhooks_circuit_breakers_open` | gauge | |
//! | `webhooks_store_errors_total` | counter | `kind` |

use std::time::Duration;

use crate::delivery::decide::Verdict;
pub use crate::queue::Backlog;
use crate::routes::Endpoint;
use crate::store::StoreError;

/// The `outcome` label of a delivery attempt: the [`Verdict`]'s variant,
/// lowercase. No wildcard: a new verdict is a new arm here.
pub fn outcome(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Delivered => "delivered",
        Verdict::Retry { .. } => "retry",
        Verdict::Dead(_) => "dead",
        Verdict::Blacklist(_) => "blacklist",
        Verdict::Drop(_) => "drop",
        Verdict::Defer { .. } => "deferred",
        Verdict::Park { .. } => "parked",
    }
}

/// The `route` label of an API endpoint.
pub fn route(endpoint: Endpoint) -> &'static str {
    match endpoint {
        Endpoint::CreateSubscription => "create_subscription",
        Endpoint::ListSubscriptions => "list_subscriptions",
        Endpoint::GetSubscription => "get_subscription",
        Endpoint::DeleteSubscription => "delete_subscription",
        Endpoint::GetSubscriptionSecret => "get_subscription_secret",
        Endpoint::RotateSubscriptionSecret => "rotate_subscription_secret",
        Endpoint::GetMessage => "get_message",
        Endpoint::ListNotifications => "list_notifications",
        Endpoint::GetNotification => "get_notification",
        Endpoint::ResendNotification => "resend_notification",
        Endpoint::RecoverNotifications => "recover_notifications",
        Endpoint::GetDeliveryStats => "get_delivery_stats",
        Endpoint::IngestEvent => "ingest_event",
    }
}

/// The `route` label of an API request, resolved from its method and path
/// (`unmatched` when no endpoint fits).
pub fn route_of(method: &http::Method, path: &str) -> &'static str {
    crate::routes::Route::resolve(method, path).map_or("unmatched", |r| route(r.endpoint()))
}

/// The `kind` label of a store error.
pub fn store_error_kind(e: &StoreError) -> &'static str {
    match e {
        StoreError::LimitReached(_) => "limit_reached",
        StoreError::TooManySecrets(_) => "too_many_secrets",
        StoreError::SecretReused => "secret_reused",
        StoreError::Backend(_) => "backend",
        StoreError::Unavailable(_) => "unavailable",
        StoreError::Conflict(_) => "conflict",
        StoreError::Corrupt { .. } => "corrupt",
    }
}

#[cfg(feature = "metrics")]
mod registry;
#[cfg(feature = "metrics")]
pub use registry::{install, is_installed, render, CONTENT_TYPE};

/// Hooks: each does nothing unless metrics are installed.
#[cfg(feature = "metrics")]
macro_rules! with_metrics {
    (|$m:ident| $body:expr) => {
        if let Some($m) = registry::get() {
            $body;
        }
    };
}
#[cfg(not(feature = "metrics"))]
macro_rules! with_metrics {
    (|$m:ident| $body:expr) => {};
}

/// One API request answered: its route label (see [`route`], or `console`,
/// `openapi`, `unmatched`), status and duration.
#[allow(unused_variables)]
pub fn http_request(route: &'static str, status: u16, elapsed: Duration) {
    with_metrics!(|m| m.http_request(route, status, elapsed));
}

/// One event ingested over `POST /events` and the notifications it
/// created (a repeated event id counts nothing).
#[allow(unused_variables)]
pub fn event_ingested(notifications: usize, duplicate: bool) {
    with_metrics!(|m| if !duplicate {
        m.event_ingested(notifications)
    });
}

/// One delivery attempt decided: its verdict, the callback call's duration
/// in ms (None when nothing was sent), the notification's creation (epoch
/// ms) and the attempt's start: a delivery's lag runs from the creation to
/// the answer (start + call).
#[allow(unused_variables)]
pub fn delivery_attempt(verdict: &Verdict, call_ms: Option<u64>, created_at: i64, started: i64) {
    with_metrics!(|m| m.delivery_attempt(
        outcome(verdict),
        call_ms.map(Duration::from_millis),
        lag(verdict, call_ms, created_at, started)
    ));
}

/// A delivery's lag: from the notification's creation to the 2xx answer
/// (None for any other verdict, or when nothing was sent).
pub fn lag(
    verdict: &Verdict,
    call_ms: Option<u64>,
    created_at: i64,
    started: i64,
) -> Option<Duration> {
    let answered = started.saturating_add(i64::try_from(call_ms?).ok()?);
    (matches!(verdict, Verdict::Delivered) && created_at > 0)
        .then(|| Duration::from_millis(u64::try_from(answered - created_at).unwrap_or(0)))
}

/// A store (or history) operation failed.
#[allow(unused_variables)]
pub fn store_error(e: &StoreError) {
    with_metrics!(|m| m.store_error(store_error_kind(e)));
}

/// Circuit breakers open or half-open, counted when `/metrics` is scraped.
#[allow(unused_variables)]
pub fn breakers_open(open: usize) {
    with_metrics!(|m| m.breakers_open(open));
}

/// The queue's backlog, read when `/metrics` is scraped.
#[allow(unused_variables)]
pub fn queue_backlog(backlog: Backlog) {
    with_metrics!(|m| m.queue_backlog(backlog));
}
