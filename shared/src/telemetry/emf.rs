//! CloudWatch Embedded Metric Format: the queue functions' figures as one
//! JSON line per invocation in their logs (CloudWatch Logs turns it into
//! metrics; no API call, nothing linked). The namespace is
//! `WEBHOOKS_METRICS_NAMESPACE` (template parameter `MetricsNamespace`,
//! default `Webhooks`); the one dimension is `Function` (`ingest-events`,
//! `deliver-notifications`).
//!
//! Metrics (all per invocation):
//!
//! - `ingest-events`: `Records`, `EventsIngested`, `DuplicateEvents`,
//!   `NotificationsCreated`, `RecordsFailed` (Count)
//! - `deliver-notifications`: `Records`, `DeliveryAttempts`,
//!   `Attempts.<outcome>` (Count; the verdicts' outcome labels,
//!   `Verdict::label`: delivered, retry, dead, blacklist, drop, deferred), `RecordsUnsettled` (Count),
//!   `ServiceFaults` (Count: jobs deferred by the service's own fault reaching an AWS
//!   destination, its credentials or external-id prefix; the operator alarm
//!   `ServiceFaultsAlarm` of template.yaml watches it),
//!   `AttemptDuration` and `DeliveryLag` (Milliseconds, one value per
//!   attempt / delivery)

use std::cell::RefCell;
use std::sync::OnceLock;

use serde_json::{json, Map, Value};

/// Every outcome label, in the order the line lists them (`deferred`: a job
/// postponed without an attempt, by a per-subscription cap or an open
/// circuit breaker, once the pipeline has such a verdict).
const OUTCOMES: [&str; 6] = [
    "delivered",
    "retry",
    "dead",
    "blacklist",
    "drop",
    "deferred",
];
/// EMF takes at most 100 values of one metric per line.
const MAX_VALUES: usize = 100;

/// What one `ingest-events` invocation did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IngestFigures {
    /// Queue records in the batch (`Records`).
    pub records: u64,
    /// Events ingested for the first time (`EventsIngested`).
    pub ingested: u64,
    /// Events already ingested, by event id (`DuplicateEvents`).
    pub duplicates: u64,
    /// Notifications the ingested events fanned out to (`NotificationsCreated`).
    pub notifications: u64,
    /// Records reported as failed, for SQS to deliver again (`RecordsFailed`).
    pub failed: u64,
}

/// What one `deliver-notifications` invocation did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct DeliveryFigures {
    /// Queue records in the batch.
    pub records: u64,
    /// Attempts by outcome label.
    outcomes: Vec<(&'static str, u64)>,
    /// Records not settled, left for SQS to deliver again.
    pub unsettled: u64,
    /// Jobs deferred by the service's own fault (`ServiceFaults`).
    pub service_faults: u64,
    attempt_ms: Vec<f64>,
    lag_ms: Vec<f64>,
}

impl DeliveryFigures {
    /// An invocation's figures, for a batch of `records`.
    pub fn new(records: u64) -> Self {
        DeliveryFigures {
            records,
            ..Default::default()
        }
    }

    /// One attempt: its verdict's `outcome` label, how long `deliver`
    /// took, and for a delivery the lag since the notification's creation.
    pub fn attempt(&mut self, outcome: &'static str, took_ms: f64, lag_ms: Option<f64>) {
        match self.outcomes.iter_mut().find(|(o, _)| *o == outcome) {
            Some((_, n)) => *n += 1,
            None => self.outcomes.push((outcome, 1)),
        }
        if self.attempt_ms.len() < MAX_VALUES {
            self.attempt_ms.push(took_ms);
        }
        if let (Some(lag), true) = (lag_ms, self.lag_ms.len() < MAX_VALUES) {
            self.lag_ms.push(lag);
        }
    }
}

fn namespace() -> &'static str {
    static NAMESPACE: OnceLock<String> = OnceLock::new();
    NAMESPACE.get_or_init(|| {
        std::env::var("WEBHOOKS_METRICS_NAMESPACE")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "Webhooks".to_owned())
    })
}

/// One EMF line: `values` are the metrics (name, unit, value) at the root.
fn line(function: &str, now_ms: i64, values: Vec<(String, &str, Value)>) -> String {
    let definitions: Vec<Value> = values
        .iter()
        .map(|(name, unit, _)| json!({"Name": name, "Unit": unit}))
        .collect();
    let mut root = Map::new();
    root.insert(
        "_aws".into(),
        json!({
            "Timestamp": now_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace(),
                "Dimensions": [["Function"]],
                "Metrics": definitions,
            }],
        }),
    );
    root.insert("Function".into(), json!(function));
    for (name, _, value) in values {
        root.insert(name, value);
    }
    Value::Object(root).to_string()
}

/// The `ingest-events` line.
pub fn ingest_line(f: &IngestFigures, now_ms: i64) -> String {
    let count = |name: &str, n: u64| (name.to_owned(), "Count", json!(n));
    line(
        "ingest-events",
        now_ms,
        vec![
            count("Records", f.records),
            count("EventsIngested", f.ingested),
            count("DuplicateEvents", f.duplicates),
            count("NotificationsCreated", f.notifications),
            count("RecordsFailed", f.failed),
        ],
    )
}

/// The `remind-expiring` line.
pub fn reminder_line(reminded: u64, now_ms: i64) -> String {
    line(
        "remind-expiring",
        now_ms,
        vec![("SubscriptionsReminded".to_owned(), "Count", json!(reminded))],
    )
}

/// The `deliver-notifications` line (every outcome listed, zeros included,
/// so that the dashboard's arithmetic finds each one).
pub fn delivery_line(f: &DeliveryFigures, now_ms: i64) -> String {
    let count = |name: String, n: u64| (name, "Count", json!(n));
    let attempts: u64 = f.outcomes.iter().map(|(_, n)| n).sum();
    let mut values = vec![
        count("Records".into(), f.records),
        count("DeliveryAttempts".into(), attempts),
    ];
    let known = OUTCOMES.iter().copied();
    let others = f
        .outcomes
        .iter()
        .map(|(o, _)| *o)
        .filter(|o| !OUTCOMES.contains(o));
    for outcome in known.chain(others) {
        let n = f
            .outcomes
            .iter()
            .find(|(o, _)| *o == outcome)
            .map_or(0, |(_, n)| *n);
        values.push(count(format!("Attempts.{outcome}"), n));
    }
    values.push(count("RecordsUnsettled".into(), f.unsettled));
    values.push(count("ServiceFaults".into(), f.service_faults));
    if !f.attempt_ms.is_empty() {
        values.push((
            "AttemptDuration".into(),
            "Milliseconds",
            json!(f.attempt_ms),
        ));
    }
    if !f.lag_ms.is_empty() {
        values.push(("DeliveryLag".into(), "Milliseconds", json!(f.lag_ms)));
    }
    line("deliver-notifications", now_ms, values)
}

thread_local! {
    static CAPTURED: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Writes the line to stdout, where Lambda's log capture takes it (or to
/// the current thread's capture, in tests).
pub fn emit(line: String) {
    let line = CAPTURED.with(|c| match c.borrow_mut().as_mut() {
        Some(lines) => {
            lines.push(line);
            None
        }
        None => Some(line),
    });
    if let Some(line) = line {
        println!("{line}");
    }
}

/// Runs `f` and returns what it emitted on this thread (for tests: a
/// current-thread runtime's task, such as `#[tokio::test]`'s).
pub async fn capture<T>(f: impl std::future::Future<Output = T>) -> (T, Vec<String>) {
    CAPTURED.with(|c| *c.borrow_mut() = Some(Vec::new()));
    let out = f.await;
    let lines = CAPTURED.with(|c| c.borrow_mut().take()).unwrap_or_default();
    (out, lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_line_declares_every_value_it_carries() {
        let mut f = DeliveryFigures::new(2);
        f.attempt("delivered", 12.0, Some(340.0));
        f.attempt("retry", 8.0, None);
        let v: Value = serde_json::from_str(&delivery_line(&f, 1_700_000_000_000)).unwrap();
        let directive = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "Webhooks");
        assert_eq!(directive["Dimensions"], json!([["Function"]]));
        assert_eq!(v["Function"], "deliver-notifications");
        for metric in directive["Metrics"].as_array().unwrap() {
            let name = metric["Name"].as_str().unwrap();
            assert!(!v[name].is_null(), "{name} declared but absent");
        }
        assert_eq!(v["DeliveryAttempts"], 2);
        assert_eq!(v["Attempts.delivered"], 1);
        assert_eq!(v["Attempts.retry"], 1);
        assert_eq!(v["Attempts.dead"], 0);
        assert_eq!(v["AttemptDuration"], json!([12.0, 8.0]));
        assert_eq!(v["DeliveryLag"], json!([340.0]));
        assert_eq!(v["ServiceFaults"], 0, "zero is declared too, for the alarm");
    }
}
