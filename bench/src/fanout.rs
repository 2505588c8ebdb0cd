//! Fan-out cost: dispatching one event that matches 10 subscriptions, with
//! 0 and with 100,000 unrelated subscriptions in the store. Two stores side
//! by side, measured in alternation so machine noise hits both alike; the
//! ratio of their medians shows whether the filter index works. Then the
//! same 10 subscriptions each with a payload filter, one that holds (what
//! evaluating it costs) and one that refuses (what an unmatched event saves).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use webhook_core::aws::dynamodb::{client_from_env, create_tables, DynamoStore, Tables};
use webhook_core::aws::outbox::AwsOutbox;
use webhook_core::aws::sqs::SqsQueue;
use webhook_core::clock::{Clock, SystemClock};
use webhook_core::ingest::{self, EventEnvelope};
use webhook_core::payload_filter::PayloadFilter;
use webhook_core::queue::Outbox;
use webhook_core::sqlite::SqliteDb;
use webhook_core::store::{Store, Upsert};
use webhook_core::{App, Config, Profile};

use crate::api::{event_body, inbound_filter};
use crate::load::{histogram, micros};
use crate::report::{fmt_us, left, right, LatencyBars, Section, Table, Target};
use crate::Settings;

const ORG: &str = "fanout";
const DEP: &str = "dep-1";
const MATCHING: usize = 10;

#[derive(Debug, Clone, Serialize)]
pub struct FanoutResult {
    pub backend: String,
    /// What one dispatch is: the whole `ingest` (fan-out + outbox commit) or the lookup only.
    pub measured: String,
    pub matching: usize,
    /// What the second store holds beyond the first's 10 plain subscriptions.
    pub compared: String,
    pub unrelated: u64,
    pub events: u64,
    pub seed_seconds: f64,
    pub empty_p50_us: u64,
    pub empty_p99_us: u64,
    pub empty_mean_us: f64,
    pub loaded_p50_us: u64,
    pub loaded_p99_us: u64,
    pub loaded_mean_us: f64,
    /// The second store's median ÷ the first's.
    pub ratio_p50: f64,
    pub ratio_mean: f64,
}

/// One store under test: how to dispatch an event through it.
struct Subject {
    app: App,
    store: Arc<dyn Store>,
    /// For the whole `ingest`; none where there is no SQS to enqueue on.
    outbox: Option<Arc<dyn Outbox>>,
    /// Notifications one event makes here (fewer where payload filters refuse it).
    notifies: usize,
}

impl Subject {
    /// The whole `ingest` (`full`, needs an outbox) or the fan-out lookup only.
    async fn dispatch(&self, event_id: &str, full: bool) -> Result<Duration, String> {
        let body = event_body(ORG, DEP, event_id, event_id);
        let envelope: EventEnvelope = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        let event = envelope
            .validate(SystemClock.now_ms())
            .map_err(|e| e.detail)?;
        let t0 = Instant::now();
        if full {
            let outbox = self.outbox.as_ref().expect("full ingest has an outbox");
            let done = ingest::ingest(&self.app, outbox.as_ref(), event)
                .await
                .map_err(|e| e.detail)?;
            if done.notifications != self.notifies {
                return Err(format!(
                    "{} notifications, expected {}",
                    done.notifications, self.notifies
                ));
            }
        } else {
            let subs = self
                .store
                .subscriptions_for_filter(&event.filter().to_string())
                .await
                .map_err(|e| e.to_string())?;
            if subs.len() != MATCHING {
                return Err(format!("{} subscriptions, expected {MATCHING}", subs.len()));
            }
        }
        Ok(t0.elapsed())
    }
}

fn upsert(org: &str, dep: &str, uri: String, id: String) -> Upsert {
    upsert_filtered(org, dep, uri, id, None)
}

fn upsert_filtered(
    org: &str,
    dep: &str,
    uri: String,
    id: String,
    payload_filter: Option<&PayloadFilter>,
) -> Upsert {
    let now = SystemClock.now_ms();
    Upsert {
        org_id: org.into(),
        uri,
        event_filters: vec![inbound_filter(org, dep)],
        disabled_filters: vec![],
        expires_at: now + 30 * 86_400_000,
        now,
        new_id: id.into(),
        new_secret: "whsec_c2VlZGVkLXNlY3JldC1mb3ItdGVzdHM=".into(),
        max_per_org: 10_000_000,
        ordered: None,
        rate_limit: None,
        role_arn: None,
        external_id: None,
        payload_filter: payload_filter.map(|f| Some(f.clone())),
        retry_schedule: None,
        custom_headers: None,
    }
}

/// The 10 subscriptions the measured event's path matches, each with
/// `payload_filter` if given.
async fn seed_matching(
    store: &dyn Store,
    payload_filter: Option<&PayloadFilter>,
) -> Result<(), String> {
    for k in 0..MATCHING {
        store
            .upsert_subscription(upsert_filtered(
                ORG,
                DEP,
                format!("http://127.0.0.1:9/fanout/{k}"),
                uuid::Uuid::now_v7().to_string(),
                payload_filter,
            ))
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `n` subscriptions in 1,000-subscription organizations, each with a filter
/// of its own department: none matches the measured event.
async fn seed_unrelated(
    label: &str,
    store: Arc<dyn Store>,
    n: u64,
    workers: usize,
) -> Result<Duration, String> {
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let bar = crate::load::progress(&format!("{label}: seed"), n, "subs");
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let (store, next, done) = (store.clone(), next.clone(), done.clone());
        set.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<(), String>(());
                }
                let org = format!("unrelated-{}", i / 1000);
                let dep = format!("dep-{}", i % 1000);
                store
                    .upsert_subscription(upsert(
                        &org,
                        &dep,
                        format!("https://example.com/hooks/{i}"),
                        uuid::Uuid::now_v7().to_string(),
                    ))
                    .await
                    .map_err(|e| format!("seeding subscription {i}: {e}"))?;
                done.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let ticker = {
        let (bar, done) = (bar.clone(), done.clone());
        tokio::spawn(async move {
            loop {
                bar.set_position(done.load(Ordering::Relaxed));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let mut result = Ok(());
    while let Some(r) = set.join_next().await {
        if let Ok(Err(e)) = r {
            result = Err(e);
        }
    }
    ticker.abort();
    bar.finish_and_clear();
    result.map(|()| started.elapsed())
}

/// Alternates dispatches on both subjects; returns (empty, loaded) latencies.
async fn measure(
    label: &str,
    empty: &Subject,
    loaded: &Subject,
    events: u64,
    full: bool,
) -> Result<(Histogram<u64>, Histogram<u64>), String> {
    let run = if full { "ingest" } else { "lookup" };
    // Warm both (caches, connections, prepared statements). The ids carry
    // the label: a store measured twice must not see an event id again.
    for i in 0..10 {
        empty
            .dispatch(&format!("warm-{label}-{run}-{i}"), full)
            .await?;
        loaded
            .dispatch(&format!("warm-{label}-{run}-{i}"), full)
            .await?;
    }
    let (mut e, mut l) = (histogram(), histogram());
    let bar = crate::load::progress(&format!("{label}: {run}"), events, "events");
    for i in 0..events {
        let id = format!("fan-{label}-{run}-{i}");
        if i % 2 == 0 {
            e.saturating_record(micros(empty.dispatch(&id, full).await?));
            l.saturating_record(micros(loaded.dispatch(&id, full).await?));
        } else {
            l.saturating_record(micros(loaded.dispatch(&id, full).await?));
            e.saturating_record(micros(empty.dispatch(&id, full).await?));
        }
        bar.set_position(i + 1);
    }
    bar.finish_and_clear();
    Ok((e, l))
}

fn result(
    backend: &str,
    full: bool,
    compared: String,
    unrelated: u64,
    events: u64,
    seed: Duration,
    (e, l): (Histogram<u64>, Histogram<u64>),
) -> FanoutResult {
    let r = FanoutResult {
        backend: backend.into(),
        measured: if full {
            "ingest (lookup + outbox commit)".into()
        } else {
            "fan-out lookup (subscriptions_for_filter)".into()
        },
        matching: MATCHING,
        compared,
        unrelated,
        events,
        seed_seconds: seed.as_secs_f64(),
        empty_p50_us: e.value_at_quantile(0.5),
        empty_p99_us: e.value_at_quantile(0.99),
        empty_mean_us: e.mean(),
        loaded_p50_us: l.value_at_quantile(0.5),
        loaded_p99_us: l.value_at_quantile(0.99),
        loaded_mean_us: l.mean(),
        ratio_p50: l.value_at_quantile(0.5) as f64 / e.value_at_quantile(0.5).max(1) as f64,
        ratio_mean: l.mean() / e.mean().max(1.0),
    };
    let us = fmt_us;
    println!(
        "  {:<10} 10 plain: p50 {} p99 {}   {}: p50 {} p99 {}   ratio ×{:.2} (p50), ×{:.2} (mean)  [{}]",
        r.backend,
        us(r.empty_p50_us),
        us(r.empty_p99_us),
        r.compared,
        us(r.loaded_p50_us),
        us(r.loaded_p99_us),
        r.ratio_p50,
        r.ratio_mean,
        r.measured
    );
    r
}

pub async fn sqlite(s: &Settings) -> Result<Vec<FanoutResult>, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let config = Config::from_lookup(Profile::Local, |_| None).map_err(|e| e.to_string())?;
    let subject = |name: &str| -> Result<Subject, String> {
        let store = SqliteDb::open(&dir.path().join(name)).map_err(|e| e.to_string())?;
        let store = Arc::new(store);
        Ok(Subject {
            app: App::new(config.clone(), store.clone()),
            outbox: Some(store.clone()),
            store,
            notifies: MATCHING,
        })
    };
    let (empty, loaded) = (subject("empty.db")?, subject("loaded.db")?);
    seed_matching(empty.store.as_ref(), None).await?;
    seed_matching(loaded.store.as_ref(), None).await?;
    let seed = seed_unrelated("sqlite", loaded.store.clone(), s.fanout_unrelated, 4).await?;
    let mut results = Vec::new();
    for full in [false, true] {
        let times = measure("sqlite", &empty, &loaded, s.fanout_events, full).await?;
        results.push(result(
            "SQLite",
            full,
            unrelated(s.fanout_unrelated),
            s.fanout_unrelated,
            s.fanout_events,
            seed,
            times,
        ));
    }
    Ok(results)
}

fn unrelated(n: u64) -> String {
    format!("+{n} unrelated subscriptions")
}

/// A payload filter on each of the 10: one that holds for the measured
/// event's message and one that refuses it, as `docs/api.md` writes them.
fn payload_filter(holds: bool) -> Result<(String, PayloadFilter), String> {
    let to = if holds { "+15550100" } else { "+15550001" };
    let filter = serde_json::json!({
        "message.to": {"$in": [to, "+15550002"]},
        "messageInfo.status": "RECEIVED",
    });
    let label = if holds { "holds" } else { "refuses" };
    let filter = PayloadFilter::parse(&filter).map_err(|e| e.to_string())?;
    Ok((format!("a payload filter on each ({label})"), filter))
}

/// The whole ingest with 10 plain subscriptions against the same 10 with a
/// payload filter each (SQLite: the filter is evaluated in the process, the
/// same on every store). Where the filter refuses, nothing is committed.
pub async fn filtered(s: &Settings) -> Result<Vec<FanoutResult>, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let config = Config::from_lookup(Profile::Local, |_| None).map_err(|e| e.to_string())?;
    let subject = |name: &str, notifies: usize| -> Result<Subject, String> {
        let store = Arc::new(SqliteDb::open(&dir.path().join(name)).map_err(|e| e.to_string())?);
        Ok(Subject {
            app: App::new(config.clone(), store.clone()),
            outbox: Some(store.clone()),
            store,
            notifies,
        })
    };
    let plain = subject("plain.db", MATCHING)?;
    seed_matching(plain.store.as_ref(), None).await?;
    let mut results = Vec::new();
    for holds in [true, false] {
        let (compared, filter) = payload_filter(holds)?;
        let name = format!("filtered-{holds}.db");
        let filtered = subject(&name, if holds { MATCHING } else { 0 })?;
        seed_matching(filtered.store.as_ref(), Some(&filter)).await?;
        let times = measure(&compared, &plain, &filtered, s.fanout_events, true).await?;
        results.push(result(
            "SQLite",
            true,
            compared,
            0,
            s.fanout_events,
            Duration::ZERO,
            times,
        ));
    }
    Ok(results)
}

/// DynamoDB Local: the lookup, and the whole ingest when an SQS endpoint
/// (moto) is there for the outbox. The outbox's DynamoDB and SQS calls do
/// not depend on the subscriptions and the emulators' latency dominates
/// them, so the lookup is the figure that shows the index.
pub async fn dynamodb(s: &Settings) -> Result<Vec<FanoutResult>, String> {
    if std::env::var("AWS_ENDPOINT_URL_DYNAMODB").is_err() {
        return Err("AWS_ENDPOINT_URL_DYNAMODB is not set (run scripts/bench.sh, which starts DynamoDB Local)".into());
    }
    let config = Config::from_lookup(Profile::Lambda, |_| None).map_err(|e| e.to_string())?;
    let client = client_from_env().await;
    let queue = crate::bench_queue("webhooks-bench-fanout")
        .await?
        .map(|(sqs, url)| SqsQueue::new(sqs, url, None));
    let mut subjects = Vec::new();
    for label in ["empty", "loaded"] {
        let run = uuid::Uuid::new_v4().simple().to_string();
        let tables = Tables {
            subscriptions: format!("webhooks-bench-fanout-{label}-{}-subscriptions", &run[..8]),
            messages: format!("webhooks-bench-fanout-{label}-{}-messages", &run[..8]),
        };
        create_tables(&client, &tables)
            .await
            .map_err(|e| format!("creating tables on DynamoDB Local: {e}"))?;
        let store = Arc::new(DynamoStore::new(client.clone(), tables));
        let app = App::new(config.clone(), store.clone());
        let outbox = queue.as_ref().map(|queue| {
            Arc::new(AwsOutbox::new(
                store.clone(),
                queue.clone(),
                app.clock.clone(),
            )) as Arc<dyn Outbox>
        });
        subjects.push(Subject {
            app,
            store,
            outbox,
            notifies: MATCHING,
        });
    }
    let loaded = subjects.pop().expect("two subjects");
    let empty = subjects.pop().expect("two subjects");
    seed_matching(empty.store.as_ref(), None).await?;
    seed_matching(loaded.store.as_ref(), None).await?;
    let seed = seed_unrelated("dynamodb", loaded.store.clone(), s.dynamodb_unrelated, 16).await?;
    let mut results = Vec::new();
    let modes: &[bool] = if queue.is_some() {
        &[false, true]
    } else {
        &[false]
    };
    for &full in modes {
        // A whole ingest on the emulators takes about half a second (moto's
        // SQS most of it): fewer events for that mode.
        let events = if full {
            s.fanout_events.min(60)
        } else {
            s.fanout_events
        };
        let times = measure("dynamodb", &empty, &loaded, events, full).await?;
        results.push(result(
            "DynamoDB Local",
            full,
            unrelated(s.dynamodb_unrelated),
            s.dynamodb_unrelated,
            events,
            seed,
            times,
        ));
    }
    Ok(results)
}

// ---------------------------------------------------------------------------
// Results: the targets, the table and the latency bars.

impl FanoutResult {
    /// What one dispatch was: the whole ingest or the lookup only.
    fn mode(&self) -> &'static str {
        if self.measured.starts_with("ingest") {
            "ingest"
        } else {
            "lookup"
        }
    }
}

/// Each unrelated-subscriptions measurement: the loaded store's median within
/// 1.2× the empty one's, with at least 100,000 unrelated subscriptions; the
/// payload filters that hold: within 1.1× the plain subscriptions' ingest.
/// (Filters that refuse have no goal: they save the commit.)
pub fn targets(results: &[FanoutResult]) -> Vec<Target> {
    results.iter().filter_map(target).collect()
}

fn target(f: &FanoutResult) -> Option<Target> {
    let measured = format!(
        "×{:.2} (p50 {} vs {})",
        f.ratio_p50,
        fmt_us(f.loaded_p50_us),
        fmt_us(f.empty_p50_us)
    );
    if f.unrelated > 0 {
        return Some(Target {
            target: format!(
                "fan-out, {} vs 0 unrelated subscriptions ({}, {})",
                f.unrelated,
                f.backend,
                f.mode()
            ),
            goal: "≤ 1.2×".into(),
            measured,
            met: Some(f.ratio_p50 <= 1.2 && f.unrelated >= 100_000),
        });
    }
    f.compared.ends_with("(holds)").then(|| Target {
        target: format!(
            "fan-out, 10 subscriptions with vs without a payload filter ({}, {})",
            f.backend,
            f.mode()
        ),
        goal: "≤ 1.1×".into(),
        measured,
        met: Some(f.ratio_p50 <= 1.1),
    })
}

/// One row per measurement (no section when the suite did not run).
pub fn section(results: &[FanoutResult]) -> Option<Section> {
    if results.is_empty() {
        return None;
    }
    let columns = [
        left("backend"),
        left("measured"),
        left("compared with 10 plain subscriptions"),
        right("p50 (plain)"),
        right("p99 (plain)"),
        right("p50 (compared)"),
        right("p99 (compared)"),
        right("ratio p50"),
        right("ratio mean"),
        right("seeding"),
    ];
    let table = Table::of(columns, results, row_cells);
    Some(Section::table("Fan-out", table).with_intro(
        "One event matching 10 subscriptions, dispatched through the store port (two stores \
         measured in alternation: one holding only the 10, the other also holding the \
         unrelated ones, or the same 10 each with a payload filter that holds or refuses: \
         refused, the event commits nothing).",
    ))
}

fn row_cells(f: &FanoutResult) -> Vec<String> {
    vec![
        f.backend.clone(),
        f.measured.clone(),
        f.compared.clone(),
        fmt_us(f.empty_p50_us),
        fmt_us(f.empty_p99_us),
        fmt_us(f.loaded_p50_us),
        fmt_us(f.loaded_p99_us),
        format!("{:.2}", f.ratio_p50),
        format!("{:.2}", f.ratio_mean),
        format!("{:.0} s", f.seed_seconds),
    ]
}

/// Two groups per measurement, plain then compared (p50 standing in for p90).
pub fn latency_bars(results: &[FanoutResult]) -> Vec<LatencyBars> {
    results
        .iter()
        .flat_map(|f| {
            [
                LatencyBars::new(
                    format!("fan-out {} {} (10 plain)", f.backend, f.mode()),
                    [f.empty_p50_us, f.empty_p50_us, f.empty_p99_us],
                ),
                LatencyBars::new(
                    format!("fan-out {} {} ({})", f.backend, f.mode(), f.compared),
                    [f.loaded_p50_us, f.loaded_p50_us, f.loaded_p99_us],
                ),
            ]
        })
        .collect()
}
