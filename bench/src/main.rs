//! `webhooks-bench`: measures the webhook service against references taken
//! in the same run, so the figures hold on a noisy machine.
//!
//! - `api`: the HTTP API of a `webhooks-local` it starts (create, list, get
//!   subscription, get message, ingest) vs a hello-world server + the same client
//! - `e2e`: event → notification received, throughput and latency
//! - `lambda`: init and invoke of every function under a fake Runtime API,
//!   vs a no-op `lambda_runtime` function
//! - `fanout`: dispatch cost with 0 vs 100,000 unrelated subscriptions
//!   (SQLite, DynamoDB Local)
//! - `sizes`: function binaries and arm64 zips
//!
//! Results go to `bench/results/` as JSON, Markdown and an SVG chart.
//! `scripts/bench.sh` builds everything, starts the emulators and runs it.

mod api;
mod e2e;
mod fanout;
mod lambda;
mod load;
mod process;
mod receiver;
mod report;
mod sizes;

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

use clap::{Parser, ValueEnum};
use webhook_core::auth::jwt::{mint_hs256, ALL_SCOPES};

use crate::api::Api;
use crate::process::{memory, Listening, RssSampler};
use crate::report::{combine, ApiRow, E2eRow, Machine, Report, ServiceMemory};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Suite {
    Api,
    E2e,
    Lambda,
    Fanout,
    Sizes,
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
    /// Cold starts of each Lambda function.
    #[arg(long, default_value_t = 10)]
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
    /// Where the release binaries are (default: beside this binary).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Where `cargo lambda build` put its zips (default: target/lambda).
    #[arg(long)]
    lambda_dir: Vec<PathBuf>,
    /// Output directory.
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    /// RUST_LOG of the webhooks-local under test.
    #[arg(long, default_value = "info")]
    server_log: String,
    /// Internal: serve the reference hello-world on a free loopback port.
    #[arg(long, hide = true)]
    reference_server: bool,
}

impl Settings {
    fn report_settings(&self) -> report::Settings {
        report::Settings {
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

fn random_hex(bytes: usize) -> String {
    (0..bytes.div_ceil(16))
        .map(|_| uuid::Uuid::new_v4().simple().to_string())
        .collect::<String>()
        .chars()
        .take(bytes * 2)
        .collect()
}

async fn run(s: Settings) -> Result<(), String> {
    let suites: Vec<Suite> = if s.suites.is_empty() {
        Suite::value_variants().to_vec()
    } else {
        s.suites.clone()
    };
    let has = |suite: Suite| suites.contains(&suite);
    let mut report = Report {
        generated_at: chrono_now(),
        machine: Machine::detect(),
        settings: s.report_settings(),
        reference_runs: vec![],
        reference: None,
        api: vec![],
        e2e: vec![],
        service_memory: None,
        lambda: vec![],
        fanout: vec![],
        sizes: vec![],
        targets: vec![],
        problems: vec![],
    };
    println!(
        "webhooks-bench: {} cores, suites {:?}, results in {}",
        report.machine.cores,
        suites,
        s.out.display()
    );

    if has(Suite::Api) || has(Suite::E2e) {
        http_suites(&s, has(Suite::Api), has(Suite::E2e), &mut report).await?;
    }
    if has(Suite::Lambda) {
        println!("\n== Lambda init and invoke (fake Runtime API)");
        match lambda::run(&s).await {
            Ok(results) => report.lambda = results,
            Err(e) => report.problems.push(format!("lambda: {e}")),
        }
    }
    if has(Suite::Fanout) {
        println!("\n== Fan-out: 10 matching subscriptions, 0 vs many unrelated");
        match fanout::sqlite(&s).await {
            Ok(r) => report.fanout.extend(r),
            Err(e) => report.problems.push(format!("fan-out (SQLite): {e}")),
        }
        match fanout::dynamodb(&s).await {
            Ok(r) => report.fanout.extend(r),
            Err(e) => report
                .problems
                .push(format!("fan-out (DynamoDB Local): {e}")),
        }
    }
    if has(Suite::Sizes) {
        println!("\n== Sizes");
        let bin_dir = process::workspace_binary(s.bin_dir.as_deref(), "x")
            .parent()
            .map(PathBuf::from)
            .unwrap_or_default();
        let mut dirs = s.lambda_dir.clone();
        if let Ok(t) = std::env::var("CARGO_TARGET_DIR") {
            dirs.push(PathBuf::from(t).join("lambda"));
        }
        dirs.push(process::repo_root().join("target/lambda"));
        report.sizes = sizes::run(&bin_dir, &dirs);
    }
    for p in &report.problems {
        println!("problem: {p}");
    }
    report.evaluate_targets();
    report.write(&s.out)?;
    println!("\n{}", report.markdown());
    println!(
        "wrote {0}/results.json, {0}/results.md, {0}/latency.svg",
        s.out.display()
    );
    Ok(())
}

fn chrono_now() -> String {
    webhook_core::clock::iso_millis(webhook_core::clock::Clock::now_ms(
        &webhook_core::clock::SystemClock,
    ))
}

async fn http_suites(
    s: &Settings,
    run_api: bool,
    run_e2e: bool,
    report: &mut Report,
) -> Result<(), String> {
    let local = process::workspace_binary(s.bin_dir.as_deref(), "webhooks-local");
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (key, secret) = (format!("bench-{}", random_hex(16)), random_hex(32));
    let log =
        std::fs::File::create(data.path().join("webhooks-local.log")).map_err(|e| e.to_string())?;
    let mut command = Command::new(&local);
    command
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(data.path().join("data"))
        .env("WEBHOOKS_API_KEYS", &key)
        .env("WEBHOOKS_JWT_HS256_SECRET", &secret)
        .env("RUST_LOG", &s.server_log)
        .env_remove("WEBHOOKS_BACKEND")
        .stderr(log);
    let service = Listening::spawn(command, "webhooks-local listening on ")
        .map_err(|e| format!("{e} (build it with `cargo build --release -p webhooks-local`)"))?;
    let mut reference_cmd = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
    reference_cmd.arg("--reference-server");
    let reference = Listening::spawn(reference_cmd, "reference listening on ")?;
    let receiver = receiver::Receiver::start().await?;
    let base = format!("http://{}/prod", service.addr);
    let token = |org: &str| {
        mint_hs256(
            &secret,
            "org_id",
            org,
            &ALL_SCOPES,
            Duration::from_secs(86_400),
        )
    };
    let pool = s.concurrency.max(s.e2e_concurrency) * 2;
    let api = Api::new(base.clone(), &key, &token(api::ORG), pool);
    let e2e_api = Api::new(base, &key, &token(e2e::ORG), pool);

    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut mem = ServiceMemory {
        idle_kib: memory(service.pid()).map_or(0, |m| m.rss_kib),
        ..ServiceMemory::default()
    };
    println!(
        "\n== HTTP API: webhooks-local (pid {}, idle RSS {:.1} MiB) vs reference server, {} connections",
        service.pid(),
        mem.idle_kib as f64 / 1024.0,
        s.concurrency
    );
    let sampler = RssSampler::start(service.pid());
    let before = api::reference_run(s, &api, reference.addr, "reference (before)").await;
    api::report_line(&before);
    let mut runs = vec![before];
    let mut scenarios = Vec::new();
    if run_api {
        match api::run(s, &api, &receiver, reference.addr).await {
            Ok(stats) => scenarios = stats,
            Err(e) => report.problems.push(format!("api: {e}")),
        }
    }
    let mut e2e_runs = Vec::new();
    if run_e2e {
        println!("\n== End to end: event → notification received");
        match e2e::run(s, &e2e_api, &receiver).await {
            Ok(r) => e2e_runs = r,
            Err(e) => report.problems.push(format!("e2e: {e}")),
        }
    }
    let after = api::reference_run(s, &api, reference.addr, "reference (after)").await;
    api::report_line(&after);
    runs.push(after);
    mem.load_max_kib = sampler.max_kib();
    drop(sampler);
    tokio::time::sleep(Duration::from_secs(2)).await;
    if let Some(m) = memory(service.pid()) {
        mem.idle_after_load_kib = m.rss_kib;
        mem.peak_kib = m.peak_kib;
    }
    report.reference_runs = runs.iter().map(|r| r.summary()).collect();
    let reference_summary = combine(&report.reference_runs).expect("two runs");
    for scenario in &scenarios {
        let st = &scenario.stats;
        let summary = st.summary();
        if st.errors > 0 {
            report.problems.push(format!(
                "{}: {} errors, first: {}",
                st.name,
                st.errors,
                st.first_error.clone().unwrap_or_default()
            ));
        }
        // Timed scenarios divide by the reference slices interleaved with
        // them; the others by the average of the reference runs.
        let paired = scenario.reference.as_ref().map(|r| r.summary());
        let divisor = paired.as_ref().unwrap_or(&reference_summary);
        report.api.push(ApiRow {
            throughput_ratio: summary.per_second / divisor.per_second.max(1e-9),
            p50_ratio: summary.p50_us as f64 / divisor.p50_us.max(1) as f64,
            p99_ratio: summary.p99_us as f64 / divisor.p99_us.max(1) as f64,
            reference_per_second: divisor.per_second,
            paired_reference: paired,
            summary,
        });
    }
    for run in &e2e_runs {
        let summary = run.summary();
        report.e2e.push(E2eRow {
            throughput_ratio: summary.notifications_per_second
                / reference_summary.per_second.max(1e-9),
            p99_ratio: summary.p99_us as f64 / reference_summary.p99_us.max(1) as f64,
            summary,
        });
    }
    report.reference = Some(reference_summary);
    println!(
        "  webhooks-local RSS: idle {:.1} MiB, max under load {:.1} MiB, peak {:.1} MiB, idle after load {:.1} MiB",
        mem.idle_kib as f64 / 1024.0,
        mem.load_max_kib as f64 / 1024.0,
        mem.peak_kib as f64 / 1024.0,
        mem.idle_after_load_kib as f64 / 1024.0
    );
    report.service_memory = Some(mem);
    drop(service);
    drop(reference);
    Ok(())
}
