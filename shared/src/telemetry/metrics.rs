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
//! | `webhooks_service_faults_total` | counter | `kind` |

use std::time::Duration;

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

/// One API request answered: its route label (an endpoint's
/// [`label`](crate::routes::Endpoint::label), or `console`, `openapi`,
/// `unmatched`), status and duration.
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

/// One delivery attempt decided: its verdict's `outcome` label, the
/// callback call's duration (None when nothing was sent) and, for a
/// delivery, its lag from the notification's creation to the answer.
#[allow(unused_variables)]
pub fn delivery_attempt(outcome: &'static str, call: Option<Duration>, lag: Option<Duration>) {
    with_metrics!(|m| m.delivery_attempt(outcome, call, lag));
}

/// A store (or history) operation failed: the error's `kind` label.
#[allow(unused_variables)]
pub fn store_error(kind: &'static str) {
    with_metrics!(|m| m.store_error(kind));
}

/// The service's own fault reaching AWS destinations (its credentials, a
/// changed external-id prefix, its account unknown): the fault's `kind`.
#[allow(unused_variables)]
pub fn service_fault(kind: &'static str) {
    with_metrics!(|m| m.service_fault(kind));
}

/// Circuit breakers open or half-open, counted when `/metrics` is scraped.
#[allow(unused_variables)]
pub fn breakers_open(open: usize) {
    with_metrics!(|m| m.breakers_open(open));
}

/// The queue's backlog, read when `/metrics` is scraped: jobs due now and
/// not leased, and how long the oldest of them has been due.
#[allow(unused_variables)]
pub fn queue_backlog(due: u64, oldest_due_age: Duration) {
    with_metrics!(|m| m.queue_backlog(due, oldest_due_age));
}
