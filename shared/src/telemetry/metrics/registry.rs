//! The Prometheus registry behind the hooks of `telemetry::metrics`, built
//! on `prometheus-client` (the Prometheus project's Rust client).

use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The content type of [`render`]'s text (OpenMetrics, which Prometheus reads).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    route: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabel {
    route: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

pub(super) struct Metrics {
    registry: Registry,
    http_requests: Family<HttpLabels, Counter>,
    http_duration: Family<RouteLabel, Histogram>,
    events_ingested: Counter,
    notifications_created: Counter,
    attempts: Family<OutcomeLabel, Counter>,
    attempt_duration: Histogram,
    lag: Histogram,
    queue_due: Gauge,
    queue_oldest_age: Gauge<f64, AtomicU64>,
    breakers_open: Gauge,
    store_errors: Family<KindLabel, Counter>,
    service_faults: Family<KindLabel, Counter>,
}

static METRICS: OnceLock<Metrics> = OnceLock::new();

pub(super) fn get() -> Option<&'static Metrics> {
    METRICS.get()
}

/// Starts counting (idempotent). Before it, every hook does nothing.
pub fn install() {
    METRICS.get_or_init(Metrics::new);
}

/// Whether [`install`] has run, i.e. whether the hooks count.
pub fn is_installed() -> bool {
    METRICS.get().is_some()
}

/// The text exposition of every family; None when not installed.
pub fn render() -> Option<String> {
    let m = METRICS.get()?;
    let mut out = String::with_capacity(8 * 1024);
    prometheus_client::encoding::text::encode(&mut out, &m.registry).ok()?;
    Some(out)
}

/// 1 ms to about 33 s: API answers and callback calls.
fn latency_buckets() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.001, 2.0, 16,
    ))
}

/// 10 ms to about 1.5 days: from an event to its callback, retries included.
fn lag_buckets() -> Histogram {
    Histogram::new([
        0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
        14400.0, 43200.0, 129600.0,
    ])
}

impl Metrics {
    fn new() -> Self {
        let m = Metrics {
            registry: Registry::default(),
            http_requests: Family::default(),
            http_duration: Family::new_with_constructor(latency_buckets),
            events_ingested: Counter::default(),
            notifications_created: Counter::default(),
            attempts: Family::default(),
            attempt_duration: latency_buckets(),
            lag: lag_buckets(),
            queue_due: Gauge::default(),
            queue_oldest_age: Gauge::default(),
            breakers_open: Gauge::default(),
            store_errors: Family::default(),
            service_faults: Family::default(),
        };
        let mut registry = Registry::default();
        // Counters are registered without `_total`: the encoder appends it.
        registry.register(
            "webhooks_http_requests",
            "API requests answered, by route and status",
            m.http_requests.clone(),
        );
        registry.register(
            "webhooks_http_request_duration_seconds",
            "Time to answer an API request, by route",
            m.http_duration.clone(),
        );
        registry.register(
            "webhooks_events_ingested",
            "Events ingested (repeated event ids not counted)",
            m.events_ingested.clone(),
        );
        registry.register(
            "webhooks_notifications_created",
            "Notifications created by ingested events",
            m.notifications_created.clone(),
        );
        registry.register(
            "webhooks_delivery_attempts",
            "Delivery attempts, by outcome (the verdict: delivered, retry, dead, blacklist, drop)",
            m.attempts.clone(),
        );
        registry.register(
            "webhooks_delivery_attempt_duration_seconds",
            "Duration of the callback POST of a delivery attempt",
            m.attempt_duration.clone(),
        );
        registry.register(
            "webhooks_delivery_lag_seconds",
            "From an event accepted to its callback answering 2xx",
            m.lag.clone(),
        );
        registry.register(
            "webhooks_queue_due_jobs",
            "Delivery jobs due now and not leased (SQLite backend)",
            m.queue_due.clone(),
        );
        registry.register(
            "webhooks_queue_oldest_due_age_seconds",
            "How long the oldest due delivery job has waited (SQLite backend)",
            m.queue_oldest_age.clone(),
        );
        registry.register(
            "webhooks_circuit_breakers_open",
            "Subscriptions whose circuit breaker is open or half-open",
            m.breakers_open.clone(),
        );
        registry.register(
            "webhooks_store_errors",
            "Store and history operations that failed, by kind",
            m.store_errors.clone(),
        );
        registry.register(
            "webhooks_service_faults",
            "The service's own faults reaching AWS destinations (its credentials, its external-id prefix, its account), by kind",
            m.service_faults.clone(),
        );
        Metrics { registry, ..m }
    }

    pub(super) fn http_request(&self, route: &'static str, status: u16, elapsed: Duration) {
        self.http_requests
            .get_or_create(&HttpLabels { route, status })
            .inc();
        self.http_duration
            .get_or_create(&RouteLabel { route })
            .observe(elapsed.as_secs_f64());
    }

    pub(super) fn event_ingested(&self, notifications: usize) {
        self.events_ingested.inc();
        self.notifications_created.inc_by(notifications as u64);
    }

    pub(super) fn delivery_attempt(
        &self,
        outcome: &'static str,
        call: Option<Duration>,
        lag: Option<Duration>,
    ) {
        self.attempts.get_or_create(&OutcomeLabel { outcome }).inc();
        if let Some(call) = call {
            self.attempt_duration.observe(call.as_secs_f64());
        }
        if let Some(lag) = lag {
            self.lag.observe(lag.as_secs_f64());
        }
    }

    pub(super) fn store_error(&self, kind: &'static str) {
        self.store_errors.get_or_create(&KindLabel { kind }).inc();
    }

    pub(super) fn service_fault(&self, kind: &'static str) {
        self.service_faults.get_or_create(&KindLabel { kind }).inc();
    }

    pub(super) fn breakers_open(&self, open: usize) {
        self.breakers_open
            .set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    pub(super) fn queue_backlog(&self, due: u64, oldest_due_age: Duration) {
        self.queue_due.set(i64::try_from(due).unwrap_or(i64::MAX));
        self.queue_oldest_age.set(oldest_due_age.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_render_with_their_names() {
        install();
        let m = get().unwrap();
        m.http_request("get_subscription", 200, Duration::from_millis(3));
        m.event_ingested(2);
        m.delivery_attempt(
            "delivered",
            Some(Duration::from_millis(5)),
            Some(Duration::from_secs(1)),
        );
        m.store_error("unavailable");
        m.queue_backlog(3, Duration::from_millis(1500));
        m.breakers_open(2);
        let text = render().unwrap();
        for line in [
            "webhooks_http_requests_total{route=\"get_subscription\",status=\"200\"} 1",
            "webhooks_events_ingested_total 1",
            "webhooks_notifications_created_total 2",
            "webhooks_delivery_attempts_total{outcome=\"delivered\"} 1",
            "webhooks_delivery_lag_seconds_count 1",
            "webhooks_delivery_attempt_duration_seconds_count 1",
            "webhooks_http_request_duration_seconds_count{route=\"get_subscription\"} 1",
            "webhooks_store_errors_total{kind=\"unavailable\"} 1",
            "webhooks_queue_due_jobs 3",
            "webhooks_queue_oldest_due_age_seconds 1.5",
            "webhooks_circuit_breakers_open 2",
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
    }
}
