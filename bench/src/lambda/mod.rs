//! Lambda init and invoke: each function binary (native release build)
//! started under the fake Runtime API (`webhooks_bench::runtime_api`),
//! init measured as exec → first `GET .../invocation/next`, fed the sample
//! events of `events/`, its peak RSS read. The no-op `lambda_runtime`
//! function of this crate is the reference. `functions.rs` lists what runs
//! and is fed, `environment.rs` what the functions find, `report.rs` the
//! table and target; this file runs the cold starts.

mod environment;
mod functions;
mod report;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;
use webhooks_bench::runtime_api::RunningFunction;

use crate::load::{histogram, micros};
use crate::Settings;
use environment::{prepare, seed, Environment};
use functions::{answer_label, event_text, function_env, lambda_env, Function, FUNCTIONS};
pub use functions::{binary_of, LAMBDA_BINARY, NOOP};
pub use report::{init_target, section, LambdaResult};
use report::{median, print_result};

/// A function binary under a Runtime API of its own with Lambda's
/// environment and `vars`, for the suites that drive a function as part of
/// a pipeline (`cost`); killed when dropped.
pub async fn start(
    bin: &Path,
    name: &str,
    vars: Vec<(String, String)>,
    log: &Path,
) -> Result<RunningFunction, String> {
    let mut env = lambda_env(name);
    env.extend(vars);
    RunningFunction::start(bin, &env, log)
        .await
        .map_err(|e| format!("{name}: {e}"))
}

/// What the cold starts of one function gathered.
struct Acc {
    bin: PathBuf,
    events: Vec<String>,
    log: PathBuf,
    inits: Vec<f64>,
    first_invokes: Vec<f64>,
    invoke: Histogram<u64>,
    answers: BTreeMap<String, u64>,
    peak: u64,
    error: Option<String>,
}

fn accumulator(settings: &Settings, f: &Function, env: &Environment) -> Acc {
    let bin = settings.lambda_binary(binary_of(f.name));
    let log = env.logs.join(format!("{}.log", f.name));
    let _ = std::fs::remove_file(&log);
    let events: Result<Vec<String>, String> = f.events.iter().map(|e| event_text(e, env)).collect();
    let error = if !bin.exists() {
        Some(format!(
            "{} is missing: build it with `cargo build --release --workspace --bins`",
            bin.display()
        ))
    } else {
        events.as_ref().err().cloned()
    };
    Acc {
        bin,
        events: events.unwrap_or_default(),
        log,
        inits: Vec::new(),
        first_invokes: Vec::new(),
        invoke: histogram(),
        answers: BTreeMap::new(),
        peak: 0,
        error,
    }
}

/// One cold start: exec → first `next`, then `invocations` invocations
/// (the first one is the cold invocation), peak RSS, kill.
async fn cold_start(
    f: &Function,
    env: &Environment,
    acc: &mut Acc,
    invocations: usize,
) -> Result<(), String> {
    // Every function finds the seeded subscription (delete-subscription removes it).
    if f.store {
        if let Some((_, store)) = &env.dynamodb {
            seed(store, &env.receiver.uri("/lambda")).await?;
        }
    }
    let can_invoke = !f.store || env.dynamodb.is_some();
    let function = RunningFunction::start(&acc.bin, &function_env(f, env), &acc.log).await?;
    acc.inits.push(function.init.as_secs_f64() * 1000.0);
    if can_invoke {
        for i in 0..invocations {
            if f.reseed && i > 0 {
                if let Some((_, store)) = &env.dynamodb {
                    seed(store, &env.receiver.uri("/lambda")).await?;
                }
            }
            let event = acc.events[i % acc.events.len()].clone();
            let outcome = function.invoke_outcome(event).await?;
            let us = micros(outcome.answered.duration_since(outcome.handed_out));
            if i == 0 {
                acc.first_invokes.push(us as f64);
            } else {
                acc.invoke.saturating_record(us);
            }
            *acc.answers
                .entry(answer_label(f.kind, &outcome))
                .or_insert(0) += 1;
        }
    }
    if let Some(mem) = crate::process::memory(function.pid()) {
        acc.peak = acc.peak.max(mem.peak_kib);
    }
    Ok(())
}

fn result(f: &Function, mut acc: Acc) -> LambdaResult {
    let invoke = &acc.invoke;
    let q = |q: f64| {
        if invoke.is_empty() {
            0
        } else {
            invoke.value_at_quantile(q)
        }
    };
    let mut sorted = acc.inits.clone();
    LambdaResult {
        function: f.name.to_owned(),
        cold_starts: acc.inits.len(),
        init_ms_median: median(&mut sorted),
        init_ms_min: sorted.first().copied().unwrap_or(0.0),
        init_ms_max: sorted.last().copied().unwrap_or(0.0),
        init_ratio: 0.0,
        first_invoke_us_median: median(&mut acc.first_invokes) as u64,
        invocations: invoke.len(),
        invoke_p50_us: q(0.5),
        invoke_p99_us: q(0.99),
        invoke_max_us: invoke.max(),
        peak_rss_kib: acc.peak,
        answers: acc.answers.clone(),
        error: acc.error.take(),
    }
}

/// Cold starts go round by round over every function (the no-op among
/// them), so a busy moment of the machine hits them all alike; the first
/// round also runs the warm invocations.
pub async fn run(settings: &Settings) -> Result<Vec<LambdaResult>, String> {
    let env = prepare().await?;
    let mut accs: Vec<Acc> = FUNCTIONS
        .iter()
        .map(|f| accumulator(settings, f, &env))
        .collect();
    let total = (settings.cold_starts * FUNCTIONS.len()) as u64;
    let bar = crate::load::progress("cold starts", total, "");
    for round in 0..settings.cold_starts {
        let mut order: Vec<usize> = (0..FUNCTIONS.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            bar.inc(1);
            let (f, acc) = (&FUNCTIONS[i], &mut accs[i]);
            if acc.error.is_some() {
                continue;
            }
            let invocations = if round == 0 { settings.invocations } else { 1 };
            if let Err(e) = cold_start(f, &env, acc, invocations).await {
                acc.error = Some(e);
            }
        }
    }
    bar.finish_and_clear();
    // Deliveries of the sample notification reach the receiver: not part of any figure.
    env.receiver.take();
    let mut results: Vec<LambdaResult> = FUNCTIONS
        .iter()
        .zip(accs)
        .map(|(f, acc)| result(f, acc))
        .collect();
    let noop = results
        .iter()
        .find(|r| r.function == NOOP && r.error.is_none())
        .map(|r| r.init_ms_median)
        .unwrap_or(0.0);
    for r in &mut results {
        if noop > 0.0 {
            r.init_ratio = r.init_ms_median / noop;
        }
        print_result(r);
    }
    Ok(results)
}
