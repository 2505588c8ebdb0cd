//! End to end: `POST /prod/events` → fan-out → outbox → delivery workers →
//! signed POST received by the local callback receiver. Latency is receipt
//! time minus the time the event was sent, matched by `webhook-id` (the
//! notification uuid, derived from event id and subscription id).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use http::StatusCode;
use serde::Serialize;
use webhook_core::notification::notification_id;

use crate::api::{event_body, inbound_filter, Api};
use crate::load::{closed_loop, histogram, micros, open_loop, Limit, Stats, Summary};
use crate::receiver::Receiver;
use crate::report::{fmt_us, left, right, LatencyBars, Section, Table, Target};
use crate::Settings;

/// The organization of the end-to-end scenarios.
pub const ORG: &str = "bench-e2e";

#[derive(Debug, Clone)]
pub struct E2eRun {
    pub name: String,
    /// The `POST /prod/events` requests themselves.
    pub ingest: Stats,
    pub fan_out: usize,
    pub expected: u64,
    pub received: u64,
    /// First event sent → last notification received.
    pub elapsed: Duration,
    /// Notifications received during the sending window.
    pub received_while_sending: u64,
    pub sending: Duration,
    /// Event sent → notification received.
    pub latency: Histogram<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct E2eSummary {
    pub name: String,
    pub fan_out: usize,
    pub events: u64,
    pub event_errors: u64,
    pub events_per_second: f64,
    pub notifications_expected: u64,
    pub notifications_received: u64,
    pub seconds: f64,
    /// Received ÷ (first send → last receipt): the sustained delivery rate.
    pub notifications_per_second: f64,
    /// Received during the sending window ÷ its length.
    pub notifications_per_second_while_sending: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl E2eRun {
    pub fn summary(&self) -> E2eSummary {
        let q = |q: f64| {
            if self.latency.is_empty() {
                0
            } else {
                self.latency.value_at_quantile(q)
            }
        };
        E2eSummary {
            name: self.name.clone(),
            fan_out: self.fan_out,
            events: self.ingest.ok,
            event_errors: self.ingest.errors,
            events_per_second: self.ingest.ok as f64 / self.sending.as_secs_f64().max(1e-9),
            notifications_expected: self.expected,
            notifications_received: self.received,
            seconds: self.elapsed.as_secs_f64(),
            notifications_per_second: self.received as f64 / self.elapsed.as_secs_f64().max(1e-9),
            notifications_per_second_while_sending: self.received_while_sending as f64
                / self.sending.as_secs_f64().max(1e-9),
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            max_us: self.latency.max(),
        }
    }
}

/// Subscriptions of `ORG`/`dep` to `count` distinct receiver paths; their ids.
pub(crate) async fn subscribe(
    api: &Api,
    receiver: &Receiver,
    dep: &str,
    count: usize,
) -> Result<Vec<String>, String> {
    let filter = inbound_filter(ORG, dep);
    let mut ids = Vec::new();
    for k in 0..count {
        ids.push(
            api.create(&receiver.uri(&format!("/e2e/{dep}/{k}")), &filter)
                .await?,
        );
    }
    Ok(ids)
}

pub(crate) enum Pace {
    /// As fast as `concurrency` closed-loop senders go, for the duration.
    Closed(usize),
    /// Events per second, open loop, for the duration.
    Rate(f64),
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn scenario(
    name: &str,
    api: &Api,
    receiver: &Receiver,
    dep: &str,
    subscriptions: &[String],
    pace: Pace,
    warmup: Duration,
    duration: Duration,
) -> Result<E2eRun, String> {
    let prefix = format!("{dep}-{}-", uuid::Uuid::new_v4().simple());
    let sent: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
    let op = {
        let (api, prefix, sent, dep) = (api.clone(), prefix.clone(), sent.clone(), dep.to_owned());
        move |i: u64| {
            let api = api.clone();
            let event_id = format!("{prefix}{i}");
            let body = event_body(ORG, &dep, &event_id, &event_id);
            let sent = sent.clone();
            async move {
                sent.lock().expect("not poisoned").insert(i, Instant::now());
                api.post("/events", body, StatusCode::ACCEPTED)
                    .await
                    .map(|_| ())
            }
        }
    };
    // Nothing left over from earlier scenarios.
    receiver.take();
    let started = Instant::now();
    let ingest = match pace {
        Pace::Closed(concurrency) => {
            closed_loop(name, concurrency, warmup, Limit::For(duration), op).await
        }
        Pace::Rate(rate) => open_loop(name, rate, duration, op).await,
    };
    let sending = started.elapsed();
    let received_while_sending = receiver.count();
    let sent = std::mem::take(&mut *sent.lock().expect("not poisoned"));
    let expected_total = sent.len() as u64 * subscriptions.len() as u64;
    // Wait for the queue to drain: until every notification arrived, or 15 s without progress.
    let bar = crate::load::progress(&format!("{name}: drain"), expected_total, "notif");
    let mut last = (receiver.count(), Instant::now());
    loop {
        let now = receiver.count();
        bar.set_position(now);
        if now >= expected_total {
            break;
        }
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(15) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bar.finish_and_clear();
    let arrivals = receiver.take();
    let index: HashMap<String, u64> = sent
        .keys()
        .flat_map(|&i| {
            let event_id = format!("{prefix}{i}");
            subscriptions
                .iter()
                .map(move |s| (notification_id(&event_id, s).to_string(), i))
        })
        .collect();
    let mut latency = histogram();
    let mut seen = HashSet::new();
    let first_send = sent.values().min().copied().unwrap_or(started);
    let mut last_arrival = first_send;
    for (id, at) in &arrivals {
        let Some(i) = index.get(id) else { continue };
        if !seen.insert(id.clone()) {
            continue;
        }
        latency.saturating_record(micros(at.saturating_duration_since(sent[i])));
        last_arrival = last_arrival.max(*at);
    }
    Ok(E2eRun {
        name: name.to_owned(),
        ingest,
        fan_out: subscriptions.len(),
        expected: expected_total,
        received: seen.len() as u64,
        elapsed: last_arrival.saturating_duration_since(first_send),
        received_while_sending: received_while_sending.min(seen.len() as u64),
        sending,
        latency,
    })
}

pub async fn run(s: &Settings, api: &Api, receiver: &Receiver) -> Result<Vec<E2eRun>, String> {
    let fan = subscribe(api, receiver, "dep-fan", s.fan_out).await?;
    let one = subscribe(api, receiver, "dep-one", 1).await?;
    let mut runs = Vec::new();

    let max = scenario(
        &format!("e2e max (fan-out {}, closed loop)", s.fan_out),
        api,
        receiver,
        "dep-fan",
        &fan,
        Pace::Closed(s.e2e_concurrency),
        Duration::ZERO,
        s.duration,
    )
    .await?;
    print_run(&max);
    runs.push(max);

    // Fan-out 1 as fast as the senders go: bound by ingestion (one request
    // and one outbox commit per notification), not by delivery.
    let max_one = scenario(
        "e2e max (fan-out 1, closed loop)",
        api,
        receiver,
        "dep-one",
        &one,
        Pace::Closed(s.e2e_concurrency),
        Duration::ZERO,
        s.duration,
    )
    .await?;
    print_run(&max_one);
    runs.push(max_one);

    let rate = s.sustained_notifications as f64 / s.fan_out.max(1) as f64;
    let sustained = scenario(
        &format!(
            "e2e at {} notif/s (fan-out {})",
            s.sustained_notifications, s.fan_out
        ),
        api,
        receiver,
        "dep-fan",
        &fan,
        Pace::Rate(rate),
        Duration::ZERO,
        s.duration,
    )
    .await?;
    print_run(&sustained);
    runs.push(sustained);

    let latency = scenario(
        &format!("e2e at {} events/s (fan-out 1)", s.latency_rate),
        api,
        receiver,
        "dep-one",
        &one,
        Pace::Rate(s.latency_rate as f64),
        Duration::ZERO,
        s.duration,
    )
    .await?;
    print_run(&latency);
    runs.push(latency);
    Ok(runs)
}

fn print_run(run: &E2eRun) {
    let s = run.summary();
    let us = fmt_us;
    println!(
        "  {:<30} {:>7.0} events/s → {:>7.0} notif/s sustained ({:.0}/s while sending), {}/{} received; event→received p50 {} p90 {} p99 {} max {}",
        s.name,
        s.events_per_second,
        s.notifications_per_second,
        s.notifications_per_second_while_sending,
        s.notifications_received,
        s.notifications_expected,
        us(s.p50_us),
        us(s.p90_us),
        us(s.p99_us),
        us(s.max_us)
    );
    if let Some(e) = &run.ingest.first_error {
        println!("    first error: {e}");
    }
}

// ---------------------------------------------------------------------------
// Results: each run beside the reference, the targets, the table.

/// One run's figures and their ratios to the reference server's.
#[derive(Debug, Clone, Serialize)]
pub struct E2eRow {
    #[serde(flatten)]
    pub summary: E2eSummary,
    /// notifications/s ÷ the reference's requests/s.
    pub throughput_ratio: f64,
    /// p99 event→received ÷ the reference's p99 request latency.
    pub p99_ratio: f64,
}

impl E2eRow {
    /// `reference`: the average of the reference server's runs.
    pub fn new(run: &E2eRun, reference: &Summary) -> E2eRow {
        let summary = run.summary();
        E2eRow {
            throughput_ratio: summary.notifications_per_second / reference.per_second.max(1e-9),
            p99_ratio: summary.p99_us as f64 / reference.p99_us.max(1) as f64,
            summary,
        }
    }

    fn is_closed_loop_maximum(&self) -> bool {
        self.summary.name.starts_with("e2e max")
    }

    fn received_everything(&self) -> bool {
        self.summary.notifications_received == self.summary.notifications_expected
    }
}

/// Sustained delivery at ≥ 5,000 notifications/s; fan-out 1 closed loop at
/// ≥ 7,000 notifications/s; p99 < 50 ms at `latency_rate` events/s.
pub fn targets(rows: &[E2eRow], sustained_offered: u64, latency_rate: u64) -> Vec<Target> {
    vec![
        sustained_target(rows, sustained_offered),
        fan_out_one_target(rows),
        latency_target(rows, latency_rate),
    ]
}

/// The fan-out 1 closed loop: every event is one request and one
/// notification, so this is ingestion's rate end to end.
fn fan_out_one_target(rows: &[E2eRow]) -> Target {
    let target = "end-to-end delivery, fan-out 1, closed loop";
    let goal = "≥ 7,000 notifications/s";
    let Some(r) = rows
        .iter()
        .find(|r| r.summary.fan_out == 1 && r.is_closed_loop_maximum())
    else {
        return Target::not_measured(target, goal);
    };
    let s = &r.summary;
    Target {
        target: target.into(),
        goal: goal.into(),
        measured: format!(
            "{:.0}/s ({:.0} events/s accepted; {} of {} received, p99 {})",
            s.notifications_per_second,
            s.events_per_second,
            s.notifications_received,
            s.notifications_expected,
            fmt_us(s.p99_us)
        ),
        met: Some(s.notifications_per_second >= 7000.0 && r.received_everything()),
    }
}

/// The open-loop run offered at a fixed rate (fan-out > 1) delivered
/// everything, at ≥ 5,000/s, without a growing backlog.
fn sustained_target(rows: &[E2eRow], offered: u64) -> Target {
    let target = "end-to-end delivery, embedded backend, sustained";
    let goal = "≥ 5,000 notifications/s";
    let sustained = rows
        .iter()
        .find(|r| r.summary.fan_out > 1 && !r.is_closed_loop_maximum());
    let Some(r) = sustained else {
        return Target::not_measured(target, goal);
    };
    let max = rows
        .iter()
        .find(|r| r.is_closed_loop_maximum() && r.summary.fan_out > 1);
    let s = &r.summary;
    Target {
        target: target.into(),
        goal: goal.into(),
        measured: format!(
            "{:.0}/s offered {:.0}/s: {} of {} received, p99 {}{}",
            s.notifications_per_second,
            offered,
            s.notifications_received,
            s.notifications_expected,
            fmt_us(s.p99_us),
            max.map_or(String::new(), |m| format!(
                "; closed-loop maximum {:.0}/s",
                m.summary.notifications_per_second
            ))
        ),
        met: Some(
            s.notifications_per_second >= 5000.0 && r.received_everything() && s.p99_us < 1_000_000,
        ),
    }
}

/// The fan-out 1 run: p99 event → received under 50 ms, everything received.
fn latency_target(rows: &[E2eRow], rate: u64) -> Target {
    let Some(r) = rows
        .iter()
        .find(|r| r.summary.fan_out == 1 && !r.is_closed_loop_maximum())
    else {
        return Target::not_measured("p99 event → received at 1,000 events/s", "< 50 ms");
    };
    let s = &r.summary;
    Target {
        target: format!("p99 event → received at {rate} events/s"),
        goal: "< 50 ms".into(),
        measured: format!(
            "{} ({} of {} received)",
            fmt_us(s.p99_us),
            s.notifications_received,
            s.notifications_expected
        ),
        met: Some(s.p99_us < 50_000 && r.received_everything()),
    }
}

/// One row per run (no section when the suite did not run).
pub fn section(rows: &[E2eRow]) -> Option<Section> {
    if rows.is_empty() {
        return None;
    }
    let columns = [
        left("scenario"),
        right("events/s"),
        right("notifications/s"),
        right("× reference req/s"),
        right("received"),
        right("p50"),
        right("p90"),
        right("p99"),
        right("max"),
        right("p99 × ref"),
    ];
    let table = Table::of(columns, rows, row_cells);
    Some(
        Section::table("End to end (embedded backend)", table).with_intro(
            "`POST /prod/events` → fan-out → SQLite outbox → delivery workers → signed POST \
             received by a callback receiver on loopback. Latency: event sent → notification received, matched by \
             `webhook-id`. Notifications/s: received ÷ (first event sent → last notification received).",
        ),
    )
}

fn row_cells(row: &E2eRow) -> Vec<String> {
    let e = &row.summary;
    vec![
        e.name.clone(),
        format!("{:.0}", e.events_per_second),
        format!("{:.0}", e.notifications_per_second),
        format!("{:.2}", row.throughput_ratio),
        format!("{}/{}", e.notifications_received, e.notifications_expected),
        fmt_us(e.p50_us),
        fmt_us(e.p90_us),
        fmt_us(e.p99_us),
        fmt_us(e.max_us),
        format!("{:.1}", row.p99_ratio),
    ]
}

pub fn latency_bars(rows: &[E2eRow]) -> Vec<LatencyBars> {
    rows.iter()
        .map(|r| {
            let e = &r.summary;
            LatencyBars::new(e.name.clone(), [e.p50_us, e.p90_us, e.p99_us])
        })
        .collect()
}
