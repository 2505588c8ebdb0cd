//! `webhooks-bench`: measures the webhook service against references taken
//! in the same run, so the figures hold on a noisy machine.
//!
//! - `api`: the HTTP API of a `webhooks-local` it starts (create, list, get
//!   subscription, get message, ingest) vs a hello-world server + the same client
//! - `e2e`: event → notification received, throughput and latency
//! - `lambda`: init and invoke of every function under a fake Runtime API,
//!   vs a no-op `lambda_runtime` function
//! - `fanout`: dispatch cost with 0 vs 100,000 unrelated subscriptions, and
//!   with vs without a payload filter on each matching subscription
//!   (SQLite, DynamoDB Local)
//! - `sizes`: function binaries and arm64 zips
//! - `noisy`: tenant isolation: one organization's latency while another's
//!   hanging callback has thousands of notifications queued
//! - `cost`: what AWS bills per notification, API read and create: DynamoDB
//!   units and SQS requests counted by a recording proxy in front of the
//!   emulators, priced at public on-demand prices (`cost/`)
//! - `observability`: get-subscription and e2e throughput with Prometheus
//!   metrics scraped, spans exported (OTLP), both, and both with every read
//!   traced, vs all off (printed only)
//! - `burst`: 20,000 events at once for one subscription, delivered to nginx,
//!   as a ratio to nginx's POST rate (printed only)
//! - `lease`: the SQLite queue's lease at 1,000 and 100,000 due jobs (printed only)
//!
//! Results go to a directory as JSON, Markdown and an SVG chart: a full run
//! (every suite) to `bench/results/`, which BENCHMARKS.md reports; a run of
//! some suites to `target/bench-partial/`, so it never replaces the full run's
//! files; `--out` chooses another (`--out bench/results` only when meant).
//! Each suite hands its results over (`results.rs` collects them) and
//! describes its own tables and targets; `report.rs` only renders them.
//! `scripts/bench.sh` builds everything, starts the emulators and runs it.

mod api;
mod burst;
mod cost;
mod e2e;
mod fanout;
mod http;
mod lambda;
mod load;
mod nginx;
mod noisy;
mod observability;
mod process;
mod receiver;
mod report;
mod results;
mod sizes;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::results::{Machine, Results, RunSettings};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Suite {
    Api,
    E2e,
    Lambda,
    Fanout,
    Sizes,
    Cost,
    Noisy,
    /// get-subscription and e2e throughput with metrics and OTLP export on vs off.
    Observability,
    /// One subscription's burst delivered to nginx, vs nginx's POST rate (printed).
    Burst,
    /// The SQLite queue's lease at several depths (printed).
    Lease,
}

fn duration(s: &str) -> Result<Duration, String> {
    webhook_core::config::parse_duration(s)
}

#[derive(Debug, Parser)]
#[command(
    name = "webhooks-bench",
    about = "Benchmarks of the webhook service, each figure beside a reference measured in the same run"
)]
pub struct Settings {
    /// Suites to run (all when none is named).
    #[arg(value_enum)]
    suites: Vec<Suite>,
    /// Keep-alive connections (closed-loop workers) of the API scenarios.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Length of each timed scenario.
    #[arg(long, default_value = "10s", value_parser = duration)]
    duration: Duration,
    /// Unrecorded warm-up before each timed scenario.
    #[arg(long, default_value = "1s", value_parser = duration)]
    warmup: Duration,
    /// Subscriptions created (each with a handshake); the list scenario pages through them.
    #[arg(long, default_value_t = 1000)]
    subscriptions: u64,
    /// Messages seeded through POST /prod/events for the get-message scenario.
    #[arg(long, default_value_t = 1000)]
    messages: u64,
    /// Subscriptions each event of the end-to-end throughput scenarios matches.
    #[arg(long, default_value_t = 10)]
    fan_out: usize,
    /// Closed-loop event senders of the end-to-end maximum-throughput scenario.
    #[arg(long, default_value_t = 16)]
    e2e_concurrency: usize,
    /// Notifications per second offered by the open-loop end-to-end scenario
    /// (above the 5,000/s target, so reaching the target is no rounding matter).
    #[arg(long, default_value_t = 6000)]
    sustained_notifications: u64,
    /// Events per second (fan-out 1) of the end-to-end latency scenario.
    #[arg(long, default_value_t = 1000)]
    latency_rate: u64,
    /// Cold starts of each Lambda function. Thirty: an init is 3 to 5 ms
    /// with a millisecond of noise, and the median of ten moved the ratio to
    /// the no-op by 0.3 between runs of the same binaries.
    #[arg(long, default_value_t = 30)]
    cold_starts: usize,
    /// Warm invocations of each Lambda function.
    #[arg(long, default_value_t = 200)]
    invocations: usize,
    /// Unrelated subscriptions in the loaded SQLite store of the fan-out suite.
    #[arg(long, default_value_t = 100_000)]
    fanout_unrelated: u64,
    /// Unrelated subscriptions in the loaded DynamoDB tables of the fan-out suite.
    #[arg(long, default_value_t = 100_000)]
    dynamodb_unrelated: u64,
    /// Events dispatched on each store of the fan-out suite.
    #[arg(long, default_value_t = 300)]
    fanout_events: u64,
    /// Operations of each phase of the cost suite (creates, reads, events at fan-out 1 and 10).
    #[arg(long, default_value_t = 50)]
    cost_operations: u64,
    /// Events per producer request to the events queue in the cost suite
    /// (10: `SendMessageBatch`, as docs/ shows producers; 1: `SendMessage`).
    #[arg(long, default_value_t = 10)]
    cost_events_per_send: usize,
    /// Backlogs of the cost suite's backlog phase (repeatable; none by
    /// default): that many events posted (`POST /events`, 32 senders, a
    /// refused post retried after its `Retry-After`) for one subscription
    /// whose callback answers after 1 s; the delivery queue's SQS requests
    /// per notification received, printed and in results.json.
    #[arg(long)]
    cost_backlog: Vec<u64>,
    /// Events per second at which the backlog phase posts (0: as fast as
    /// its 32 senders go); above the callback's 32/s, so the backlog builds.
    #[arg(long, default_value_t = 0.0)]
    cost_backlog_rate: f64,
    /// Backends of the noisy suite (repeatable): embedded (SQLite), aws (DynamoDB Local + moto).
    #[arg(long, value_enum, default_values_t = [noisy::Backend::Embedded])]
    noisy_backend: Vec<noisy::Backend>,
    /// Environment of the noisy suite's webhooks-local, after its
    /// WEBHOOKS_DELIVERY_TIMEOUT_MS=2000 (repeatable), e.g.
    /// `--noisy-env WEBHOOKS_DELIVERY_CONCURRENCY=64`.
    #[arg(long, value_name = "KEY=VALUE", value_parser = noisy::env_pair)]
    noisy_env: Vec<(String, String)>,
    /// Events the noisy organization posts at the start of the flood phase.
    #[arg(long, default_value_t = 2000)]
    noisy_flood: u64,
    /// Closed-loop senders of the noisy organization's events.
    #[arg(long, default_value_t = 4)]
    noisy_senders: usize,
    /// Interval between the measured organization's events.
    #[arg(long, default_value = "100ms", value_parser = duration)]
    noisy_interval: Duration,
    /// Length of the quiet phase (no flood).
    #[arg(long, default_value = "10s", value_parser = duration)]
    noisy_quiet: Duration,
    /// Length of the flood phase (the measured organization's sending).
    #[arg(long, default_value = "20s", value_parser = duration)]
    noisy_flood_phase: Duration,
    /// How long after a phase a notification may still arrive; later ones count as lost.
    #[arg(long, default_value = "60s", value_parser = duration)]
    noisy_grace: Duration,
    /// Events posted at once for one subscription by the burst suite.
    #[arg(long, default_value_t = 20_000)]
    burst_events: u64,
    /// Closed-loop senders posting the burst's events.
    #[arg(long, default_value_t = 64)]
    burst_senders: usize,
    /// Events of the burst suite's second phase, for an ordered subscription
    /// (one call at a time; 0 skips the phase).
    #[arg(long, default_value_t = 2_000)]
    burst_ordered_events: u64,
    /// Due jobs of the lease suite (repeatable).
    #[arg(long, default_values_t = [1_000, 100_000])]
    lease_jobs: Vec<usize>,
    /// Where the release binaries are (default: beside this binary).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Where the Lambda binaries (`webhooks-lambda`, `noop-lambda`) of the
    /// lambda, cost and sizes suites are, built as they are deployed
    /// (scripts/bench.sh builds them there) [default: --bin-dir].
    #[arg(long)]
    lambda_bin_dir: Option<PathBuf>,
    /// Where `cargo lambda build` put its zips (default: target/lambda).
    #[arg(long)]
    lambda_dir: Vec<PathBuf>,
    /// Output directory [default: bench/results for a full run (every suite),
    /// target/bench-partial for a run of some suites].
    #[arg(long)]
    out: Option<PathBuf>,
    /// RUST_LOG of the webhooks-local under test.
    #[arg(long, default_value = "info")]
    server_log: String,
    /// Internal: serve the reference hello-world on a free loopback port.
    #[arg(long, hide = true)]
    reference_server: bool,
}

/// Where a full run's results go: the ones BENCHMARKS.md reports.
const FULL_RUN_DIR: &str = "bench/results";
/// Where a run of some suites goes unless `--out` says otherwise.
const PARTIAL_RUN_DIR: &str = "target/bench-partial";

/// The output directory: `--out` when given, else by whether every suite runs.
fn out_dir(out: Option<&Path>, suites: &[Suite]) -> PathBuf {
    let full = Suite::value_variants().iter().all(|s| suites.contains(s));
    match out {
        Some(dir) => dir.to_path_buf(),
        None if full => PathBuf::from(FULL_RUN_DIR),
        None => PathBuf::from(PARTIAL_RUN_DIR),
    }
}

impl Settings {
    /// Where the Lambda binaries of the lambda, cost and sizes suites are:
    /// `--lambda-bin-dir`, else where the other binaries are.
    fn lambda_bin_dir(&self) -> PathBuf {
        process::binary_dir(self.lambda_bin_dir.as_deref().or(self.bin_dir.as_deref()))
    }

    fn lambda_binary(&self, name: &str) -> PathBuf {
        self.lambda_bin_dir().join(name)
    }

    fn recorded(&self) -> RunSettings {
        RunSettings {
            concurrency: self.concurrency,
            duration_s: self.duration.as_secs_f64(),
            warmup_s: self.warmup.as_secs_f64(),
            subscriptions: self.subscriptions,
            messages: self.messages,
            fan_out: self.fan_out,
            e2e_concurrency: self.e2e_concurrency,
            latency_rate: self.latency_rate,
            sustained_notifications: self.sustained_notifications,
            cold_starts: self.cold_starts,
            invocations: self.invocations,
            fanout_unrelated: self.fanout_unrelated,
            dynamodb_unrelated: self.dynamodb_unrelated,
            fanout_events: self.fanout_events,
            cost_operations: self.cost_operations,
            cost_events_per_send: self.cost_events_per_send,
            server_log: self.server_log.clone(),
        }
    }
}

/// A fresh SQS queue named `<prefix>-<random>` on the emulator at
/// `AWS_ENDPOINT_URL_SQS`, with its client and URL; `None` when no emulator is set.
pub async fn bench_queue(prefix: &str) -> Result<Option<(aws_sdk_sqs::Client, String)>, String> {
    if std::env::var("AWS_ENDPOINT_URL_SQS").is_err() {
        return Ok(None);
    }
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let name = format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let created = sqs
        .create_queue()
        .queue_name(name)
        .send()
        .await
        .map_err(|e| {
            format!(
                "creating an SQS queue: {}",
                aws_sdk_sqs::error::DisplayErrorContext(e)
            )
        })?;
    Ok(created.queue_url().map(|url| (sqs.clone(), url.to_owned())))
}

fn main() -> ExitCode {
    let settings = Settings::parse();
    if settings.reference_server {
        return serve_reference();
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("webhooks-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("webhooks-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The reference: hello world from axum on the same kind of runtime as
/// `webhooks-local` (tokio multi-thread, one worker per core), in its own process.
fn serve_reference() -> ExitCode {
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        println!(
            "reference listening on http://{}",
            listener.local_addr().expect("bound")
        );
        let router = axum::Router::new().fallback(|| async { "Hello, World!" });
        let _ = axum::serve(listener, router).await;
    });
    ExitCode::SUCCESS
}

async fn run(s: Settings) -> Result<(), String> {
    let suites: Vec<Suite> = if s.suites.is_empty() {
        Suite::value_variants().to_vec()
    } else {
        s.suites.clone()
    };
    let has = |suite: Suite| suites.contains(&suite);
    let out = out_dir(s.out.as_deref(), &suites);
    let mut results = Results::new(chrono_now(), Machine::detect(), s.recorded());
    println!(
        "webhooks-bench: {} cores, suites {:?}, results in {}",
        results.machine.cores,
        suites,
        out.display()
    );

    if has(Suite::Api) || has(Suite::E2e) {
        results.add_http(http::run(&s, has(Suite::Api), has(Suite::E2e)).await?);
    }
    if has(Suite::Noisy) {
        for &backend in &s.noisy_backend {
            println!("\n== Tenant isolation ({backend:?}): a hanging callback's flood beside a healthy one");
            match noisy::run(&s, backend).await {
                Ok(r) => results.noisy.push(r),
                Err(e) => results.problems.push(format!("noisy ({backend:?}): {e}")),
            }
        }
    }
    if has(Suite::Observability) {
        observability::run(&s).await?;
    }
    if has(Suite::Burst) {
        println!(
            "\n== Burst: {} events at once for one subscription, delivered to nginx",
            s.burst_events
        );
        if let Err(e) = burst::run(&s).await {
            results.problems.push(format!("burst: {e}"));
        }
    }
    if has(Suite::Lease) {
        println!("\n== The SQLite queue's lease, by depth");
        if let Err(e) = burst::lease_cost(&s).await {
            results.problems.push(format!("lease: {e}"));
        }
    }
    if has(Suite::Lambda) {
        println!("\n== Lambda init and invoke (fake Runtime API)");
        match lambda::run(&s).await {
            Ok(r) => results.lambda = r,
            Err(e) => results.problems.push(format!("lambda: {e}")),
        }
    }
    if has(Suite::Fanout) {
        println!("\n== Fan-out: 10 matching subscriptions, 0 vs many unrelated, without vs with payload filters");
        match fanout::sqlite(&s).await {
            Ok(r) => results.fanout.extend(r),
            Err(e) => results.problems.push(format!("fan-out (SQLite): {e}")),
        }
        match fanout::filtered(&s).await {
            Ok(r) => results.fanout.extend(r),
            Err(e) => results
                .problems
                .push(format!("fan-out (payload filters): {e}")),
        }
        match fanout::dynamodb(&s).await {
            Ok(r) => results.fanout.extend(r),
            Err(e) => results
                .problems
                .push(format!("fan-out (DynamoDB Local): {e}")),
        }
    }
    if has(Suite::Cost) {
        println!("\n== Cost on AWS: units through a recording proxy, priced");
        match cost::run(&s, &results.lambda).await {
            Ok(r) => results.cost = Some(r),
            Err(e) => results.problems.push(format!("cost: {e}")),
        }
    }
    if has(Suite::Sizes) {
        println!("\n== Sizes");
        let bin_dir = process::binary_dir(s.bin_dir.as_deref());
        let lambda_bin_dir = s.lambda_bin_dir();
        let mut dirs = s.lambda_dir.clone();
        if let Ok(t) = std::env::var("CARGO_TARGET_DIR") {
            dirs.push(PathBuf::from(t).join("lambda"));
        }
        dirs.push(process::repo_root().join("target/lambda"));
        results.sizes = sizes::run(&bin_dir, &lambda_bin_dir, &dirs);
    }
    for p in &results.problems {
        println!("problem: {p}");
    }
    results.evaluate_targets();
    let report = results.report();
    report.write(&out, &results)?;
    println!("\n{}", report.markdown());
    println!(
        "wrote {0}/results.json, {0}/results.md, {0}/latency.svg",
        out.display()
    );
    Ok(())
}

fn chrono_now() -> String {
    webhook_core::clock::iso_millis(webhook_core::clock::Clock::now_ms(
        &webhook_core::clock::SystemClock,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_full_run_writes_bench_results_unless_told() {
        let every = Suite::value_variants().to_vec();
        assert_eq!(out_dir(None, &every), PathBuf::from("bench/results"));
        assert_eq!(
            out_dir(None, &[Suite::Api, Suite::E2e]),
            PathBuf::from("target/bench-partial")
        );
        assert_eq!(
            out_dir(Some(Path::new("bench/results")), &[Suite::Lambda]),
            PathBuf::from("bench/results")
        );
        assert_eq!(
            out_dir(Some(Path::new("/tmp/x")), &every),
            PathBuf::from("/tmp/x")
        );
    }
}
