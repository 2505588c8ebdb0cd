//! What the suite reports: one row per function, and the init target.

use serde::Serialize;
use std::collections::BTreeMap;

use crate::report::{fmt_us, left, mib, right, Section, Table, Target};

use super::functions::NOOP;

#[derive(Debug, Clone, Serialize)]
pub struct LambdaResult {
    pub function: String,
    pub cold_starts: usize,
    /// exec → first `next`, median over the cold starts.
    pub init_ms_median: f64,
    pub init_ms_min: f64,
    pub init_ms_max: f64,
    /// Median init ÷ the no-op function's median init.
    pub init_ratio: f64,
    /// The first invocation after a cold start (median), µs.
    pub first_invoke_us_median: u64,
    /// Warm invocations: `next` handed out → response received.
    pub invocations: u64,
    pub invoke_p50_us: u64,
    pub invoke_p99_us: u64,
    pub invoke_max_us: u64,
    pub peak_rss_kib: u64,
    /// What the invocations answered (HTTP status, allow/deny, failures).
    pub answers: BTreeMap<String, u64>,
    pub error: Option<String>,
}

pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn print_result(r: &LambdaResult) {
    if let Some(e) = &r.error {
        println!("  {:<26} error: {e}", r.function);
        return;
    }
    let us = fmt_us;
    println!(
        "  {:<26} init {:>6.2} ms (×{:.2} no-op, {} starts)  first invoke {}  warm p50 {} p99 {}  peak RSS {:.1} MiB  {:?}",
        r.function,
        r.init_ms_median,
        r.init_ratio,
        r.cold_starts,
        us(r.first_invoke_us_median),
        us(r.invoke_p50_us),
        us(r.invoke_p99_us),
        r.peak_rss_kib as f64 / 1024.0,
        r.answers
    );
}

impl LambdaResult {
    fn answers_cell(&self) -> String {
        self.answers
            .iter()
            .map(|(k, v)| format!("{k} ×{v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Every function's init within 1.5× the no-op function's (the worst one shown).
pub fn init_target(results: &[LambdaResult]) -> Target {
    let inits: Vec<&LambdaResult> = results
        .iter()
        .filter(|r| r.function != NOOP && r.error.is_none() && r.cold_starts > 0)
        .collect();
    let no_reference = results
        .iter()
        .all(|r| r.function != NOOP || r.error.is_some());
    let worst = inits
        .iter()
        .max_by(|a, b| a.init_ratio.total_cmp(&b.init_ratio));
    let Some(worst) = worst.filter(|_| !no_reference) else {
        return Target::not_measured("Lambda init vs the no-op function", "≤ 1.5×");
    };
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
}

/// One row per function (no section when the suite did not run).
pub fn section(
    results: &[LambdaResult],
    cold_starts: usize,
    invocations: usize,
) -> Option<Section> {
    if results.is_empty() {
        return None;
    }
    let columns = [
        left("function"),
        right("init (median)"),
        right("× no-op"),
        right("init min–max"),
        right("first invoke"),
        right("warm p50"),
        right("warm p99"),
        right("peak RSS"),
        left("answers"),
    ];
    let mut table = Table::new(columns);
    for r in results {
        match &r.error {
            Some(e) => table.row_with_blanks(error_cells(r, e)),
            None => table.row(row_cells(r)),
        }
    }
    Some(
        Section::table("Lambda init and invoke", table).with_intro(format!(
            "Native release builds started by a fake Runtime API; init is exec → first \
             `GET /2018-06-01/runtime/invocation/next` (median of {cold_starts} cold starts); warm invocations are \
             `next` handed out → response received over {invocations} invocations of the sample events; peak RSS is VmHWM."
        )),
    )
}

/// A function that failed: its name and the error, the other cells blank.
fn error_cells(r: &LambdaResult, error: &str) -> Vec<Option<String>> {
    let mut cells = vec![
        Some(r.function.clone()),
        Some(format!("error: {}", error.replace('|', "/"))),
    ];
    cells.resize(9, None);
    cells
}

fn row_cells(r: &LambdaResult) -> Vec<String> {
    vec![
        r.function.clone(),
        format!("{:.2} ms", r.init_ms_median),
        format!("{:.2}", r.init_ratio),
        format!("{:.2}–{:.2} ms", r.init_ms_min, r.init_ms_max),
        fmt_us(r.first_invoke_us_median),
        fmt_us(r.invoke_p50_us),
        fmt_us(r.invoke_p99_us),
        mib(r.peak_rss_kib),
        r.answers_cell(),
    ]
}
