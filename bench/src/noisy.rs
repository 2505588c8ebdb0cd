//! Tenant isolation: organization A's callback hangs (it accepts the request
//! and answers after [`HANG`], far beyond the delivery timeout) and A posts
//! a flood of events; organization B's callback answers at once. B's event →
//! received latency (matched by `webhook-id`, as in `e2e`) is measured in a
//! quiet phase and while A's notifications are queued. A `webhooks-local`
//! of its own, started with `WEBHOOKS_DELIVERY_TIMEOUT_MS=2000` and then the
//! `--noisy-env` settings, so a run can be repeated with new ones.

use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use http::StatusCode;
use serde::Serialize;
use webhook_core::auth::jwt::{mint_hs256, ALL_SCOPES};
use webhook_core::notification::notification_id;

use crate::api::{event_body, inbound_filter, Api};
use crate::load::{closed_loop, histogram, micros, open_loop, Limit};
use crate::process::{self, Listening};
use crate::receiver::{Receiver, HANG};
use crate::report::{fmt_us, left, right, LatencyBars, Section, Table};
use crate::Settings;

/// The noisy tenant (its callback hangs) and the one measured.
pub const ORG_A: &str = "bench-noisy-a";
pub const ORG_B: &str = "bench-noisy-b";
const DEP: &str = "dep-noisy";

/// The delivery timeout the scenario runs with, unless `--noisy-env` sets another.
const DELIVERY_TIMEOUT_MS: &str = "2000";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// SQLite outbox in the data directory.
    Embedded,
    /// `--backend aws` against DynamoDB Local and moto (`scripts/bench.sh` starts them).
    Aws,
}

impl Backend {
    fn label(self) -> &'static str {
        match self {
            Backend::Embedded => "embedded (SQLite)",
            Backend::Aws => "aws (DynamoDB Local + moto)",
        }
    }
}

/// `KEY=VALUE`, for `--noisy-env`.
pub fn env_pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got '{s}'")),
    }
}

/// One phase: B's events sent at a fixed interval, and what became of them.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub name: String,
    /// B's events accepted (202); the failed posts are not counted anywhere else.
    pub sent: u64,
    pub send_errors: u64,
    pub received: u64,
    /// Not received within the grace period after the phase.
    pub lost: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// A's events accepted during the phase, and how long posting them took.
    pub a_events: u64,
    pub a_event_errors: u64,
    pub a_posting_s: f64,
    /// A's deliveries that reached the hanging callback during the phase (and its grace).
    pub a_hung: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct NoisyResult {
    pub backend: Backend,
    /// Passed to `webhooks-local` on top of `WEBHOOKS_DELIVERY_TIMEOUT_MS=2000`.
    pub env: Vec<String>,
    pub interval_ms: u64,
    pub grace_s: f64,
    pub flood_events: u64,
    pub flood_senders: usize,
    pub phases: Vec<Phase>,
}

/// `webhooks-local serve` for `backend`, with the scenario's environment.
fn start_service(
    s: &Settings,
    backend: Backend,
    data: &std::path::Path,
    key: &str,
    secret: &str,
) -> Result<Listening, String> {
    let local = process::workspace_binary(s.bin_dir.as_deref(), "webhooks-local");
    let log = std::fs::File::create(data.join("webhooks-local.log")).map_err(|e| e.to_string())?;
    let mut command = Command::new(&local);
    command
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(data.join("data"))
        .env_remove("WEBHOOKS_BACKEND");
    if backend == Backend::Aws {
        for var in ["AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"] {
            if std::env::var(var).is_err() {
                return Err(format!("{var} is not set: --noisy-backend aws needs the emulators (scripts/bench.sh starts them)"));
            }
        }
        let prefix = format!("noisy-{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
        command
            .args(["--backend", "aws", "--create-tables"])
            .env(
                "WEBHOOKS_SUBSCRIPTIONS_TABLE",
                format!("{prefix}-subscriptions"),
            )
            .env("WEBHOOKS_MESSAGES_TABLE", format!("{prefix}-messages"))
            .env_remove("WEBHOOKS_DELIVERY_QUEUE_URL")
            .env_remove("WEBHOOKS_DELIVERY_DLQ_URL");
    }
    command
        .env("WEBHOOKS_API_KEYS", key)
        .env("WEBHOOKS_JWT_HS256_SECRET", secret)
        .env("RUST_LOG", &s.server_log)
        .env("WEBHOOKS_DELIVERY_TIMEOUT_MS", DELIVERY_TIMEOUT_MS)
        .envs(s.noisy_env.iter().map(|(k, v)| (k, v)))
        .stderr(log);
    Listening::spawn(command, "webhooks-local listening on ")
        .map_err(|e| format!("{e} (build it with `cargo build --release -p webhooks-local`)"))
}

/// An organization with one subscription of `DEP` to `path` of the receiver.
struct Tenant {
    org: &'static str,
    api: Api,
    subscription: String,
}

impl Tenant {
    /// Event `event_id` of this tenant, accepted or an error.
    async fn post(&self, event_id: &str) -> Result<(), String> {
        let body = event_body(self.org, DEP, event_id, event_id);
        self.api
            .post("/events", body, StatusCode::ACCEPTED)
            .await
            .map(|_| ())
    }
}

/// B's events, one per `interval` for `length`, then up to `grace` for their
/// notifications: the phase's figures (A's left at zero).
async fn probe(
    name: &str,
    b: &Arc<Tenant>,
    receiver: &Receiver,
    interval: Duration,
    length: Duration,
    grace: Duration,
) -> Phase {
    let prefix = format!("noisy-b-{}-", uuid::Uuid::new_v4().simple());
    let sent: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
    let op = {
        let (b, prefix, sent) = (b.clone(), prefix.clone(), sent.clone());
        move |i: u64| {
            let (b, sent) = (b.clone(), sent.clone());
            let event_id = format!("{prefix}{i}");
            async move {
                sent.lock().expect("not poisoned").insert(i, Instant::now());
                let posted = b.post(&event_id).await;
                if posted.is_err() {
                    sent.lock().expect("not poisoned").remove(&i);
                }
                posted
            }
        }
    };
    let rate = 1.0 / interval.as_secs_f64().max(1e-3);
    let stats = open_loop(name, rate, length, op).await;
    let sent = std::mem::take(&mut *sent.lock().expect("not poisoned"));
    let index: HashMap<String, Instant> = sent
        .iter()
        .map(|(i, at)| {
            let id = notification_id(&format!("{prefix}{i}"), &b.subscription);
            (id.to_string(), *at)
        })
        .collect();
    // Until every notification arrived or the grace period is over.
    let deadline = Instant::now() + grace;
    let mut latency = histogram();
    let mut seen = HashSet::new();
    while seen.len() < index.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        for (id, at) in receiver.take() {
            if let Some(sent_at) = index.get(&id) {
                if seen.insert(id) {
                    latency.saturating_record(micros(at.saturating_duration_since(*sent_at)));
                }
            }
        }
    }
    let q = |q: f64| {
        if latency.is_empty() {
            0
        } else {
            latency.value_at_quantile(q)
        }
    };
    Phase {
        name: name.to_owned(),
        sent: index.len() as u64,
        send_errors: stats.errors,
        received: seen.len() as u64,
        lost: (index.len() - seen.len()) as u64,
        p50_us: q(0.5),
        p90_us: q(0.9),
        p99_us: q(0.99),
        max_us: latency.max(),
        a_events: 0,
        a_event_errors: 0,
        a_posting_s: 0.0,
        a_hung: 0,
    }
}

pub async fn run(s: &Settings, backend: Backend) -> Result<NoisyResult, String> {
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let hex = || uuid::Uuid::new_v4().simple().to_string();
    let (key, secret) = (format!("bench-{}", hex()), format!("{}{}", hex(), hex()));
    let service = start_service(s, backend, data.path(), &key, &secret)?;
    let receiver = Receiver::start().await?;
    let base = format!("http://{}/prod", service.addr);
    let tenant = |org: &'static str, path: &'static str| {
        let token = mint_hs256(
            &secret,
            "org_id",
            org,
            &ALL_SCOPES,
            Duration::from_secs(86_400),
        );
        let api = Api::new(base.clone(), &key, &token, s.noisy_senders * 2 + 8);
        let (uri, filter) = (receiver.uri(path), inbound_filter(org, DEP));
        async move {
            let subscription = api.create(&uri, &filter).await?;
            Ok::<_, String>(Arc::new(Tenant {
                org,
                api,
                subscription,
            }))
        }
    };
    let a = tenant(ORG_A, "/hang/a").await?;
    let b = tenant(ORG_B, "/noisy/b").await?;
    let (interval, grace) = (s.noisy_interval, s.noisy_grace);
    let mut phases = Vec::new();

    let hung = receiver.hung();
    let name = format!("quiet ({} s)", s.noisy_quiet.as_secs());
    let mut quiet = probe(&name, &b, &receiver, interval, s.noisy_quiet, grace).await;
    quiet.a_hung = receiver.hung() - hung;
    print_phase(&quiet);
    phases.push(quiet);

    let hung = receiver.hung();
    let flood_prefix = format!("noisy-a-{}-", hex());
    let op = {
        let a = a.clone();
        move |i: u64| {
            let a = a.clone();
            let event_id = format!("{flood_prefix}{i}");
            async move { a.post(&event_id).await }
        }
    };
    let name = format!(
        "flood ({} s, {} of A's queued)",
        s.noisy_flood_phase.as_secs(),
        s.noisy_flood
    );
    let posting = closed_loop(
        "A: flood",
        s.noisy_senders,
        Duration::ZERO,
        Limit::Count(s.noisy_flood),
        op,
    );
    let probing = probe(&name, &b, &receiver, interval, s.noisy_flood_phase, grace);
    let (posted, mut flood) = tokio::join!(posting, probing);
    flood.a_events = posted.ok;
    flood.a_event_errors = posted.errors;
    flood.a_posting_s = posted.elapsed.as_secs_f64();
    flood.a_hung = receiver.hung() - hung;
    if let Some(e) = &posted.first_error {
        println!("    A: first error: {e}");
    }
    print_phase(&flood);
    phases.push(flood);
    drop(service);

    Ok(NoisyResult {
        backend,
        env: s
            .noisy_env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        interval_ms: interval.as_millis() as u64,
        grace_s: grace.as_secs_f64(),
        flood_events: s.noisy_flood,
        flood_senders: s.noisy_senders,
        phases,
    })
}

fn print_phase(p: &Phase) {
    println!(
        "  {:<34} B: {}/{} received, {} lost, {} send errors; event→received p50 {} p90 {} p99 {} max {}; A: {} events in {:.1} s, {} deliveries hung",
        p.name,
        p.received,
        p.sent,
        p.lost,
        p.send_errors,
        fmt_us(p.p50_us),
        fmt_us(p.p90_us),
        fmt_us(p.p99_us),
        fmt_us(p.max_us),
        p.a_events,
        p.a_posting_s,
        p.a_hung
    );
}

// ---------------------------------------------------------------------------
// Results: one row per backend and phase.

/// The table (no section when the suite did not run).
pub fn section(results: &[NoisyResult]) -> Option<Section> {
    let first = results.first()?;
    let columns = [
        left("backend"),
        left("phase"),
        right("B sent"),
        right("B received"),
        right("lost"),
        right("p50"),
        right("p90"),
        right("p99"),
        right("max"),
        right("A events (posted in)"),
        right("A deliveries hung"),
    ];
    let rows = results
        .iter()
        .flat_map(|r| r.phases.iter().map(move |p| (r, p)));
    let table = Table::of(columns, rows, |(r, p)| {
        vec![
            format!("{}{}", r.backend.label(), env_note(&r.env)),
            p.name.clone(),
            p.sent.to_string(),
            p.received.to_string(),
            p.lost.to_string(),
            fmt_us(p.p50_us),
            fmt_us(p.p90_us),
            fmt_us(p.p99_us),
            fmt_us(p.max_us),
            format!("{} ({:.1} s)", p.a_events, p.a_posting_s),
            p.a_hung.to_string(),
        ]
    });
    Some(
        Section::table("Tenant isolation (noisy)", table).with_intro(format!(
            "`webhooks-local` with `WEBHOOKS_DELIVERY_TIMEOUT_MS={DELIVERY_TIMEOUT_MS}`. Organization A: one \
             subscription whose callback accepts the request and answers after {} s; {} events posted \
             by {} closed-loop senders at the start of the flood phase. Organization B: one subscription \
             answering 200 at once, one event every {} ms; latency is B's event sent → notification \
             received (matched by `webhook-id`). Lost: not received within {:.0} s after the phase.",
            HANG.as_secs(),
            first.flood_events,
            first.flood_senders,
            first.interval_ms,
            first.grace_s
        )),
    )
}

fn env_note(env: &[String]) -> String {
    if env.is_empty() {
        String::new()
    } else {
        format!(", {}", env.join(" "))
    }
}

pub fn latency_bars(results: &[NoisyResult]) -> Vec<LatencyBars> {
    results
        .iter()
        .flat_map(|r| {
            r.phases.iter().map(move |p| {
                LatencyBars::new(
                    format!("noisy {:?}: B {}", r.backend, p.name).to_lowercase(),
                    [p.p50_us, p.p90_us, p.p99_us],
                )
            })
        })
        .collect()
}
