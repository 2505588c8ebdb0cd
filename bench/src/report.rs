//! Results: JSON, a Markdown table, an SVG latency chart, and the targets.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::e2e::E2eSummary;
use crate::fanout::FanoutResult;
use crate::lambda::{LambdaResult, NOOP};
use crate::load::Summary;
use crate::sizes::SizeRow;

pub fn fmt_us(us: u64) -> String {
    if us >= 1_000_000 {
        format!("{:.2} s", us as f64 / 1e6)
    } else if us >= 1_000 {
        format!("{:.2} ms", us as f64 / 1e3)
    } else {
        format!("{us} µs")
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cores: usize,
    pub cpu: String,
    pub kernel: String,
}

impl Machine {
    pub fn detect() -> Machine {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| {
                c.lines().find_map(|l| {
                    l.strip_prefix("model name")
                        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
                })
            })
            .unwrap_or_default();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu,
            kernel,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ApiRow {
    #[serde(flatten)]
    pub summary: Summary,
    /// The reference's requests/s this row is divided by: its paired slices
    /// for timed scenarios, else the average of the reference runs.
    pub reference_per_second: f64,
    pub paired_reference: Option<Summary>,
    /// requests/s ÷ the reference's requests/s.
    pub throughput_ratio: f64,
    /// p50 ÷ the reference's p50 (how many times slower).
    pub p50_ratio: f64,
    pub p99_ratio: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct E2eRow {
    #[serde(flatten)]
    pub summary: E2eSummary,
    /// notifications/s ÷ the reference's requests/s.
    pub throughput_ratio: f64,
    /// p99 event→received ÷ the reference's p99 request latency.
    pub p99_ratio: f64,
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

#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub target: String,
    pub goal: String,
    pub measured: String,
    pub met: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub concurrency: usize,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub subscriptions: u64,
    pub messages: u64,
    pub fan_out: usize,
    pub e2e_concurrency: usize,
    pub latency_rate: u64,
    pub sustained_notifications: u64,
    pub cold_starts: usize,
    pub invocations: usize,
    pub fanout_unrelated: u64,
    pub dynamodb_unrelated: u64,
    pub fanout_events: u64,
    pub server_log: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub generated_at: String,
    pub machine: Machine,
    pub settings: Settings,
    /// The reference server, measured before and after the service's scenarios.
    pub reference_runs: Vec<Summary>,
    /// Their average: what the ratios divide by.
    pub reference: Option<Summary>,
    pub api: Vec<ApiRow>,
    pub e2e: Vec<E2eRow>,
    pub service_memory: Option<ServiceMemory>,
    pub lambda: Vec<LambdaResult>,
    pub fanout: Vec<FanoutResult>,
    pub sizes: Vec<SizeRow>,
    pub targets: Vec<Target>,
    pub problems: Vec<String>,
}

/// The average of the reference runs (throughput and each percentile).
pub fn combine(runs: &[Summary]) -> Option<Summary> {
    let n = runs.len() as f64;
    let first = runs.first()?;
    let avg = |f: &dyn Fn(&Summary) -> f64| runs.iter().map(f).sum::<f64>() / n;
    Some(Summary {
        name: "reference (average)".into(),
        requests: runs.iter().map(|r| r.requests).sum(),
        errors: runs.iter().map(|r| r.errors).sum(),
        seconds: runs.iter().map(|r| r.seconds).sum(),
        per_second: avg(&|r| r.per_second),
        p50_us: avg(&|r| r.p50_us as f64) as u64,
        p90_us: avg(&|r| r.p90_us as f64) as u64,
        p99_us: avg(&|r| r.p99_us as f64) as u64,
        max_us: runs.iter().map(|r| r.max_us).max().unwrap_or(first.max_us),
        mean_us: avg(&|r| r.mean_us),
    })
}

impl Report {
    pub fn evaluate_targets(&mut self) {
        let mut t = Vec::new();
        let api = |name: &str| self.api.iter().find(|r| r.summary.name == name);
        for name in ["get message", "get subscription"] {
            t.push(match api(name) {
                Some(r) => Target {
                    target: format!("{name}: requests/s vs the reference server"),
                    goal: "≥ 50 %".into(),
                    measured: format!(
                        "{:.0} %  ({:.0}/s vs {:.0}/s)",
                        r.throughput_ratio * 100.0,
                        r.summary.per_second,
                        r.reference_per_second
                    ),
                    met: Some(r.throughput_ratio >= 0.5),
                },
                None => not_measured(
                    &format!("{name}: requests/s vs the reference server"),
                    "≥ 50 %",
                ),
            });
        }
        // Sustained: the open-loop run offered at a fixed rate (fan-out > 1)
        // delivered everything, at ≥ 5,000/s, without a growing backlog.
        let sustained = self
            .e2e
            .iter()
            .find(|r| r.summary.fan_out > 1 && !r.summary.name.starts_with("e2e max"));
        let max = self
            .e2e
            .iter()
            .find(|r| r.summary.name.starts_with("e2e max"));
        t.push(match sustained {
            Some(r) => Target {
                target: "end-to-end delivery, embedded backend, sustained".into(),
                goal: "≥ 5,000 notifications/s".into(),
                measured: format!(
                    "{:.0}/s offered {:.0}/s: {} of {} received, p99 {}{}",
                    r.summary.notifications_per_second,
                    self.settings.sustained_notifications,
                    r.summary.notifications_received,
                    r.summary.notifications_expected,
                    fmt_us(r.summary.p99_us),
                    max.map_or(String::new(), |m| format!(
                        "; closed-loop maximum {:.0}/s",
                        m.summary.notifications_per_second
                    ))
                ),
                met: Some(
                    r.summary.notifications_per_second >= 5000.0
                        && r.summary.notifications_received == r.summary.notifications_expected
                        && r.summary.p99_us < 1_000_000,
                ),
            },
            None => not_measured(
                "end-to-end delivery, embedded backend, sustained",
                "≥ 5,000 notifications/s",
            ),
        });
        let lat = self.e2e.iter().find(|r| r.summary.fan_out == 1);
        t.push(match lat {
            Some(r) => Target {
                target: format!(
                    "p99 event → received at {} events/s",
                    self.settings.latency_rate
                ),
                goal: "< 50 ms".into(),
                measured: format!(
                    "{} ({} of {} received)",
                    fmt_us(r.summary.p99_us),
                    r.summary.notifications_received,
                    r.summary.notifications_expected
                ),
                met: Some(
                    r.summary.p99_us < 50_000
                        && r.summary.notifications_received == r.summary.notifications_expected,
                ),
            },
            None => not_measured("p99 event → received at 1,000 events/s", "< 50 ms"),
        });
        let inits: Vec<&LambdaResult> = self
            .lambda
            .iter()
            .filter(|r| r.function != NOOP && r.error.is_none() && r.cold_starts > 0)
            .collect();
        t.push(
            if inits.is_empty()
                || self
                    .lambda
                    .iter()
                    .all(|r| r.function != NOOP || r.error.is_some())
            {
                not_measured("Lambda init vs the no-op function", "≤ 1.5×")
            } else {
                let worst = inits
                    .iter()
                    .max_by(|a, b| a.init_ratio.total_cmp(&b.init_ratio))
                    .expect("not empty");
                Target {
                    target: "Lambda init vs the no-op function (worst function)".into(),
                    goal: "≤ 1.5×".into(),
                    measured: format!(
                        "×{:.2} ({}: {:.2} ms vs {:.2} ms)",
                        worst.init_ratio,
                        worst.function,
                        worst.init_ms_median,
                        worst.init_ms_median / worst.init_ratio.max(1e-9)
                    ),
                    met: Some(inits.iter().all(|r| r.init_ratio <= 1.5)),
                }
            },
        );
        let functions = crate::sizes::functions();
        let zips: Vec<&SizeRow> = self
            .sizes
            .iter()
            .filter(|r| functions.contains(&r.binary))
            .collect();
        let with_zip: Vec<&&SizeRow> = zips
            .iter()
            .filter(|r| r.arm64_zip_bytes.is_some())
            .collect();
        t.push(if with_zip.is_empty() {
            not_measured(
                "arm64 zip of each function",
                "≤ 5 MB (no bootstrap.zip found: run scripts/bench.sh --zips)",
            )
        } else {
            let largest = with_zip
                .iter()
                .max_by_key(|r| r.arm64_zip_bytes)
                .expect("not empty");
            Target {
                target: "arm64 zip of each function (largest)".into(),
                goal: "≤ 5 MB".into(),
                measured: format!(
                    "{:.2} MB ({}){}",
                    largest.arm64_zip_bytes.unwrap_or(0) as f64 / 1e6,
                    largest.binary,
                    if with_zip.len() < zips.len() {
                        format!("; {} of {} zips found", with_zip.len(), zips.len())
                    } else {
                        String::new()
                    }
                ),
                met: Some(
                    with_zip.len() == zips.len()
                        && with_zip
                            .iter()
                            .all(|r| r.arm64_zip_bytes.unwrap_or(0) <= 5_000_000),
                ),
            }
        });
        t.push(match &self.service_memory {
            Some(m) => Target {
                target: "webhooks-local idle RSS".into(),
                goal: "≤ 30 MB".into(),
                measured: format!(
                    "{:.1} MB ({:.1} MB idle after load)",
                    m.idle_kib as f64 * 1.024 / 1000.0,
                    m.idle_after_load_kib as f64 * 1.024 / 1000.0
                ),
                met: Some(m.idle_kib * 1024 <= 30_000_000),
            },
            None => not_measured("webhooks-local idle RSS", "≤ 30 MB"),
        });
        for f in &self.fanout {
            t.push(Target {
                target: format!(
                    "fan-out, {} vs 0 unrelated subscriptions ({}, {})",
                    f.unrelated,
                    f.backend,
                    mode(f)
                ),
                goal: "≤ 1.2×".into(),
                measured: format!(
                    "×{:.2} (p50 {} vs {})",
                    f.ratio_p50,
                    fmt_us(f.loaded_p50_us),
                    fmt_us(f.empty_p50_us)
                ),
                met: Some(f.ratio_p50 <= 1.2 && f.unrelated >= 100_000),
            });
        }
        self.targets = t;
    }

    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let s = &self.settings;
        let _ = writeln!(
            md,
            "Measured {} on {} cores ({}, Linux {}).\n",
            self.generated_at, self.machine.cores, self.machine.cpu, self.machine.kernel
        );
        if !self.targets.is_empty() {
            let _ = writeln!(
                md,
                "### Targets\n\n| target | goal | measured | met |\n|---|---|---|---|"
            );
            for t in &self.targets {
                let met = match t.met {
                    Some(true) => "yes",
                    Some(false) => "**no**",
                    None => "not measured",
                };
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} |",
                    t.target, t.goal, t.measured, met
                );
            }
            md.push('\n');
        }
        if let Some(r) = &self.reference {
            let _ = writeln!(
                md,
                "### HTTP API\n\n{} keep-alive connections (closed loop), {} s per scenario after {} s of \
                 warm-up. The reference is a hello-world axum server in its own process, driven by the \
                 same client with the same headers and concurrency. The timed scenarios (list, gets) \
                 are measured in 8 alternating slices each with the reference (R S S R R S ...), and each is \
                 divided by its own slices; create and ingest divide by the average of the reference \
                 runs taken before and after everything.\n",
                s.concurrency, s.duration_s, s.warmup_s
            );
            let _ = writeln!(
                md,
                "| scenario | requests/s | reference req/s | × reference | p50 | p90 | p99 | max | p50 × ref | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for run in self.reference_runs.iter().chain([r]) {
                let _ = writeln!(
                    md,
                    "| {} | {:.0} | | | {} | {} | {} | {} | | {} |",
                    run.name,
                    run.per_second,
                    fmt_us(run.p50_us),
                    fmt_us(run.p90_us),
                    fmt_us(run.p99_us),
                    fmt_us(run.max_us),
                    run.errors
                );
            }
            for row in &self.api {
                let a = &row.summary;
                let _ = writeln!(
                    md,
                    "| {} | {:.0} | {:.0}{} | **{:.2}** | {} | {} | {} | {} | {:.2} | {} |",
                    a.name,
                    a.per_second,
                    row.reference_per_second,
                    if row.paired_reference.is_some() {
                        " (paired)"
                    } else {
                        " (average)"
                    },
                    row.throughput_ratio,
                    fmt_us(a.p50_us),
                    fmt_us(a.p90_us),
                    fmt_us(a.p99_us),
                    fmt_us(a.max_us),
                    row.p50_ratio,
                    a.errors
                );
            }
            md.push('\n');
        }
        if !self.e2e.is_empty() {
            let _ = writeln!(
                md,
                "### End to end (embedded backend)\n\n`POST /prod/events` → fan-out → SQLite outbox → delivery workers → signed POST \
                 received by a callback receiver on loopback. Latency: event sent → notification received, matched by \
                 `webhook-id`. Notifications/s: received ÷ (first event sent → last notification received).\n"
            );
            let _ = writeln!(
                md,
                "| scenario | events/s | notifications/s | × reference req/s | received | p50 | p90 | p99 | max | p99 × ref |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for row in &self.e2e {
                let e = &row.summary;
                let _ = writeln!(
                    md,
                    "| {} | {:.0} | {:.0} | {:.2} | {}/{} | {} | {} | {} | {} | {:.1} |",
                    e.name,
                    e.events_per_second,
                    e.notifications_per_second,
                    row.throughput_ratio,
                    e.notifications_received,
                    e.notifications_expected,
                    fmt_us(e.p50_us),
                    fmt_us(e.p90_us),
                    fmt_us(e.p99_us),
                    fmt_us(e.max_us),
                    row.p99_ratio
                );
            }
            md.push('\n');
        }
        if let Some(m) = &self.service_memory {
            let _ = writeln!(
                md,
                "### webhooks-local memory\n\n| idle (after start) | max sampled under load | peak (VmHWM) | idle after load |\n|---:|---:|---:|---:|\n| {} | {} | {} | {} |\n",
                mib(m.idle_kib), mib(m.load_max_kib), mib(m.peak_kib), mib(m.idle_after_load_kib)
            );
        }
        if !self.lambda.is_empty() {
            let _ = writeln!(
                md,
                "### Lambda init and invoke\n\nNative release builds started by a fake Runtime API; init is exec → first \
                 `GET /2018-06-01/runtime/invocation/next` (median of {} cold starts); warm invocations are \
                 `next` handed out → response received over {} invocations of the sample events; peak RSS is VmHWM.\n",
                s.cold_starts, s.invocations
            );
            let _ = writeln!(
                md,
                "| function | init (median) | × no-op | init min–max | first invoke | warm p50 | warm p99 | peak RSS | answers |\n|---|---:|---:|---:|---:|---:|---:|---:|---|"
            );
            for r in &self.lambda {
                if let Some(e) = &r.error {
                    let _ = writeln!(
                        md,
                        "| {} | error: {} | | | | | | | |",
                        r.function,
                        e.replace('|', "/")
                    );
                    continue;
                }
                let answers = r
                    .answers
                    .iter()
                    .map(|(k, v)| format!("{k} ×{v}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let _ = writeln!(
                    md,
                    "| {} | {:.2} ms | {:.2} | {:.2}–{:.2} ms | {} | {} | {} | {} | {} |",
                    r.function,
                    r.init_ms_median,
                    r.init_ratio,
                    r.init_ms_min,
                    r.init_ms_max,
                    fmt_us(r.first_invoke_us_median),
                    fmt_us(r.invoke_p50_us),
                    fmt_us(r.invoke_p99_us),
                    mib(r.peak_rss_kib),
                    answers
                );
            }
            md.push('\n');
        }
        if !self.fanout.is_empty() {
            let _ = writeln!(
                md,
                "### Fan-out\n\nOne event matching 10 subscriptions, dispatched through the store port (two stores \
                 measured in alternation: one holding only the 10, one also holding the unrelated ones).\n"
            );
            let _ = writeln!(
                md,
                "| backend | measured | unrelated | p50 (0) | p99 (0) | p50 (loaded) | p99 (loaded) | ratio p50 | ratio mean | seeding |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for f in &self.fanout {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.0} s |",
                    f.backend,
                    f.measured,
                    f.unrelated,
                    fmt_us(f.empty_p50_us),
                    fmt_us(f.empty_p99_us),
                    fmt_us(f.loaded_p50_us),
                    fmt_us(f.loaded_p99_us),
                    f.ratio_p50,
                    f.ratio_mean,
                    f.seed_seconds
                );
            }
            md.push('\n');
        }
        if !self.sizes.is_empty() {
            let _ = writeln!(
                md,
                "### Sizes\n\n| binary | native x86_64 release | arm64 bootstrap.zip |\n|---|---:|---:|"
            );
            for r in &self.sizes {
                let size = |b: Option<u64>| {
                    b.map_or("–".to_owned(), |b| format!("{:.2} MB", b as f64 / 1e6))
                };
                let _ = writeln!(
                    md,
                    "| {} | {}{} | {} |",
                    r.binary,
                    size(r.native_bytes),
                    if r.native_stripped == Some(true) {
                        " (stripped)"
                    } else {
                        ""
                    },
                    size(r.arm64_zip_bytes)
                );
            }
            md.push('\n');
        }
        if !self.problems.is_empty() {
            let _ = writeln!(md, "### Problems during the run\n");
            for p in &self.problems {
                let _ = writeln!(md, "- {p}");
            }
            md.push('\n');
        }
        md
    }

    /// Horizontal bars of p50/p90/p99 per scenario, log scale.
    pub fn svg(&self) -> String {
        let mut rows: Vec<(String, [u64; 3])> = Vec::new();
        if let Some(r) = &self.reference {
            rows.push((r.name.clone(), [r.p50_us, r.p90_us, r.p99_us]));
        }
        for r in &self.api {
            let a = &r.summary;
            rows.push((a.name.clone(), [a.p50_us, a.p90_us, a.p99_us]));
        }
        for r in &self.e2e {
            let e = &r.summary;
            rows.push((e.name.clone(), [e.p50_us, e.p90_us, e.p99_us]));
        }
        for f in &self.fanout {
            rows.push((
                format!("fan-out {} {} (0 unrelated)", f.backend, mode(f)),
                [f.empty_p50_us, f.empty_p50_us, f.empty_p99_us],
            ));
            rows.push((
                format!(
                    "fan-out {} {} ({} unrelated)",
                    f.backend,
                    mode(f),
                    f.unrelated
                ),
                [f.loaded_p50_us, f.loaded_p50_us, f.loaded_p99_us],
            ));
        }
        latency_svg(&rows)
    }

    pub fn write(&self, dir: &Path) -> Result<(), String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let write = |name: &str, text: String| {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
        };
        write(
            "results.json",
            serde_json::to_string_pretty(self).map_err(|e| e.to_string())?,
        )?;
        write("results.md", self.markdown())?;
        write("latency.svg", self.svg())?;
        Ok(())
    }
}

fn mode(f: &FanoutResult) -> &'static str {
    if f.measured.starts_with("ingest") {
        "ingest"
    } else {
        "lookup"
    }
}

fn not_measured(target: &str, goal: &str) -> Target {
    Target {
        target: target.into(),
        goal: goal.into(),
        measured: "not measured in this run".into(),
        met: None,
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A log-scale bar chart: one group of three bars (p50, p90, p99) per row.
pub fn latency_svg(rows: &[(String, [u64; 3])]) -> String {
    const LABEL_W: f64 = 300.0;
    const PLOT_W: f64 = 560.0;
    const BAR_H: f64 = 7.0;
    const GROUP_H: f64 = 3.0 * BAR_H + 10.0;
    const TOP: f64 = 48.0;
    let colors = ["#4c78a8", "#f58518", "#e45756"];
    let max = rows
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .max()
        .unwrap_or(1000)
        .max(10);
    let min = rows
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|v| *v > 0)
        .min()
        .unwrap_or(10);
    let lo = (min as f64).log10().floor().max(0.0);
    let hi = (max as f64).log10().ceil().max(lo + 1.0);
    let x = |us: u64| {
        LABEL_W + PLOT_W * (((us.max(1) as f64).log10() - lo) / (hi - lo)).clamp(0.0, 1.0)
    };
    let height = TOP + GROUP_H * rows.len() as f64 + 40.0;
    let width = LABEL_W + PLOT_W + 30.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="10" y="20" font-size="15" font-weight="bold">webhooks-bench: latency (log scale)</text>"#
    );
    for (i, name) in ["p50", "p90", "p99"].iter().enumerate() {
        let lx = LABEL_W + i as f64 * 70.0;
        let _ = writeln!(
            svg,
            r#"<rect x="{lx}" y="28" width="12" height="10" fill="{}"/><text x="{}" y="37">{name}</text>"#,
            colors[i],
            lx + 16.0
        );
    }
    let axis_y = TOP + GROUP_H * rows.len() as f64;
    for decade in (lo as i32)..=(hi as i32) {
        let us = 10u64.pow(decade as u32);
        let gx = x(us);
        let _ = writeln!(
            svg,
            r##"<line x1="{gx:.1}" y1="{TOP}" x2="{gx:.1}" y2="{axis_y}" stroke="#ddd"/><text x="{gx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            axis_y + 16.0,
            escape(&fmt_us(us))
        );
    }
    for (i, (label, values)) in rows.iter().enumerate() {
        let gy = TOP + GROUP_H * i as f64;
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LABEL_W - 8.0,
            gy + 1.5 * BAR_H + 4.0,
            escape(label)
        );
        for (j, v) in values.iter().enumerate() {
            let y = gy + j as f64 * BAR_H;
            let w = (x(*v) - LABEL_W).max(1.0);
            let _ = writeln!(
                svg,
                r#"<rect x="{LABEL_W}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{}"><title>{} {}: {}</title></rect>"#,
                BAR_H - 1.0,
                colors[j],
                escape(label),
                ["p50", "p90", "p99"][j],
                escape(&fmt_us(*v))
            );
        }
        let last = values[2];
        let _ = writeln!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="#555">{}</text>"##,
            x(last) + 4.0,
            gy + 3.0 * BAR_H - 1.0,
            escape(&fmt_us(last))
        );
    }
    svg.push_str("</svg>\n");
    svg
}
