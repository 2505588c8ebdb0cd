//! The HTTP suites, `api` and `e2e`, run against one `webhooks-local` started
//! for them, beside the reference server (measured before and after them) and
//! the callback receiver; the service's memory is sampled throughout.

use std::process::Command;
use std::time::Duration;

use serde::Serialize;
use webhook_core::auth::jwt::{mint_hs256, ALL_SCOPES};

use crate::api::{self, Api, ApiRow, Scenario};
use crate::e2e::{self, E2eRow};
use crate::load::Summary;
use crate::process::{self, memory, Listening, RssSampler};
use crate::receiver::Receiver;
use crate::report::{mib, right, Section, Table, Target};
use crate::Settings;

/// What the HTTP suites measured.
pub struct HttpResults {
    /// The reference server, before and after the service's scenarios.
    pub reference_runs: Vec<Summary>,
    /// Their average: what the ratios divide by.
    pub reference: Summary,
    pub api: Vec<ApiRow>,
    pub e2e: Vec<E2eRow>,
    pub service_memory: ServiceMemory,
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ServiceMemory {
    /// VmRSS one second after start, before any request.
    pub idle_kib: u64,
    /// Largest VmRSS sampled (every 100 ms) while under load.
    pub load_max_kib: u64,
    /// VmHWM at the end: the peak.
    pub peak_kib: u64,
    /// VmRSS two seconds after the last load.
    pub idle_after_load_kib: u64,
}

pub fn random_hex(bytes: usize) -> String {
    (0..bytes.div_ceil(16))
        .map(|_| uuid::Uuid::new_v4().simple().to_string())
        .collect::<String>()
        .chars()
        .take(bytes * 2)
        .collect()
}

/// `webhooks-local serve` on a free loopback port, with a fresh data directory
/// in `data`, the API key `key` and the JWT secret `secret`.
fn start_service(
    s: &Settings,
    data: &std::path::Path,
    key: &str,
    secret: &str,
) -> Result<Listening, String> {
    start_service_with(s, data, key, secret, &[])
}

/// [`start_service`] with more environment variables.
pub fn start_service_with(
    s: &Settings,
    data: &std::path::Path,
    key: &str,
    secret: &str,
    env: &[(&str, String)],
) -> Result<Listening, String> {
    let local = process::workspace_binary(s.bin_dir.as_deref(), "webhooks-local");
    let log = std::fs::File::create(data.join("webhooks-local.log")).map_err(|e| e.to_string())?;
    let mut command = Command::new(&local);
    command
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(data.join("data"))
        .env("WEBHOOKS_API_KEYS", key)
        .env("WEBHOOKS_JWT_HS256_SECRET", secret)
        .env("RUST_LOG", &s.server_log)
        .env_remove("WEBHOOKS_BACKEND")
        .env_remove("WEBHOOKS_METRICS_ADDR")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stderr(log);
    Listening::spawn(command, "webhooks-local listening on ")
        .map_err(|e| format!("{e} (build it with `cargo build --release -p webhooks-local`)"))
}

/// The hello-world reference server: this binary with `--reference-server`.
fn start_reference() -> Result<Listening, String> {
    let mut command = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
    command.arg("--reference-server");
    Listening::spawn(command, "reference listening on ")
}

pub async fn run(s: &Settings, run_api: bool, run_e2e: bool) -> Result<HttpResults, String> {
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (key, secret) = (format!("bench-{}", random_hex(16)), random_hex(32));
    let service = start_service(s, data.path(), &key, &secret)?;
    let reference = start_reference()?;
    let receiver = Receiver::start().await?;
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
    let mut problems = Vec::new();
    let sampler = RssSampler::start(service.pid());
    let before = api::reference_run(s, &api, reference.addr, "reference (before)").await;
    api::report_line(&before);
    let mut scenarios = Vec::new();
    if run_api {
        match api::run(s, &api, &receiver, reference.addr).await {
            Ok(stats) => scenarios = stats,
            Err(e) => problems.push(format!("api: {e}")),
        }
    }
    let mut e2e_runs = Vec::new();
    if run_e2e {
        println!("\n== End to end: event → notification received");
        match e2e::run(s, &e2e_api, &receiver).await {
            Ok(r) => e2e_runs = r,
            Err(e) => problems.push(format!("e2e: {e}")),
        }
    }
    let after = api::reference_run(s, &api, reference.addr, "reference (after)").await;
    api::report_line(&after);
    mem.load_max_kib = sampler.max_kib();
    drop(sampler);
    tokio::time::sleep(Duration::from_secs(2)).await;
    if let Some(m) = memory(service.pid()) {
        mem.idle_after_load_kib = m.rss_kib;
        mem.peak_kib = m.peak_kib;
    }
    let reference_runs = vec![before.summary(), after.summary()];
    let average = api::average_reference(&reference_runs).expect("two runs");
    problems.extend(scenario_errors(&scenarios));
    print_memory(&mem);
    drop(service);
    drop(reference);
    Ok(HttpResults {
        api: scenarios
            .iter()
            .map(|sc| ApiRow::new(sc, &average))
            .collect(),
        e2e: e2e_runs.iter().map(|r| E2eRow::new(r, &average)).collect(),
        reference_runs,
        reference: average,
        service_memory: mem,
        problems,
    })
}

/// A problem for each scenario that met errors.
fn scenario_errors(scenarios: &[Scenario]) -> Vec<String> {
    scenarios
        .iter()
        .map(|sc| &sc.stats)
        .filter(|st| st.errors > 0)
        .map(|st| {
            format!(
                "{}: {} errors, first: {}",
                st.name,
                st.errors,
                st.first_error.clone().unwrap_or_default()
            )
        })
        .collect()
}

fn print_memory(mem: &ServiceMemory) {
    println!(
        "  webhooks-local RSS: idle {:.1} MiB, max under load {:.1} MiB, peak {:.1} MiB, idle after load {:.1} MiB",
        mem.idle_kib as f64 / 1024.0,
        mem.load_max_kib as f64 / 1024.0,
        mem.peak_kib as f64 / 1024.0,
        mem.idle_after_load_kib as f64 / 1024.0
    );
}

// ---------------------------------------------------------------------------
// Results: the memory target and table (the other figures: api.rs, e2e.rs).

/// webhooks-local idle within 30 MB.
pub fn memory_target(mem: Option<&ServiceMemory>) -> Target {
    let Some(m) = mem else {
        return Target::not_measured("webhooks-local idle RSS", "≤ 30 MB");
    };
    Target {
        target: "webhooks-local idle RSS".into(),
        goal: "≤ 30 MB".into(),
        measured: format!(
            "{:.1} MB ({:.1} MB idle after load)",
            m.idle_kib as f64 * 1.024 / 1000.0,
            m.idle_after_load_kib as f64 * 1.024 / 1000.0
        ),
        met: Some(m.idle_kib * 1024 <= 30_000_000),
    }
}

pub fn memory_section(m: &ServiceMemory) -> Section {
    let mut table = Table::new([
        right("idle (after start)"),
        right("max sampled under load"),
        right("peak (VmHWM)"),
        right("idle after load"),
    ]);
    table.row([
        mib(m.idle_kib),
        mib(m.load_max_kib),
        mib(m.peak_kib),
        mib(m.idle_after_load_kib),
    ]);
    Section::table("webhooks-local memory", table)
}
