//! Load generation: closed loops (N workers, each sending its next request
//! when the previous one is answered) and open loops (requests started at a
//! fixed rate whatever the answers do), with latencies in HDR histograms.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

/// Latencies in microseconds, 1 µs to 10 minutes, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

/// How long a loop runs.
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    For(Duration),
    Count(u64),
}

/// The result of one scenario.
#[derive(Debug, Clone)]
pub struct Stats {
    pub name: String,
    pub ok: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub elapsed: Duration,
    pub latency: Histogram<u64>,
}

/// The figures of a [`Stats`], as reported.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub name: String,
    pub requests: u64,
    pub errors: u64,
    pub seconds: f64,
    pub per_second: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    pub mean_us: f64,
}

impl Stats {
    pub fn summary(&self) -> Summary {
        summarize(
            &self.name,
            &self.latency,
            self.ok,
            self.errors,
            self.elapsed,
        )
    }
}

pub fn summarize(
    name: &str,
    latency: &Histogram<u64>,
    ok: u64,
    errors: u64,
    elapsed: Duration,
) -> Summary {
    let seconds = elapsed.as_secs_f64();
    let q = |q: f64| {
        if latency.is_empty() {
            0
        } else {
            latency.value_at_quantile(q)
        }
    };
    Summary {
        name: name.to_owned(),
        requests: ok,
        errors,
        seconds,
        per_second: ok as f64 / seconds.max(1e-9),
        p50_us: q(0.5),
        p90_us: q(0.9),
        p99_us: q(0.99),
        max_us: latency.max(),
        mean_us: latency.mean(),
    }
}

pub fn progress(name: &str, len: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let template = format!("{{prefix:>28}} [{{bar:32}}] {{pos}}/{{len}} {unit} {{msg}}");
    bar.set_style(
        ProgressStyle::with_template(&template)
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(name.to_owned());
    bar
}

#[derive(Default)]
struct Shared {
    next: AtomicU64,
    done: AtomicU64,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Shared {
    fn error(&self, e: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first_error.lock().expect("not poisoned");
        if first.is_none() {
            *first = Some(e);
        }
    }
}

/// Runs `op(i)` for i = 0, 1, 2, ... on `concurrency` workers until the
/// limit, after an unrecorded warm-up of `warmup` (with i counting on).
pub async fn closed_loop<F, Fut>(
    name: &str,
    concurrency: usize,
    warmup: Duration,
    limit: Limit,
    op: F,
) -> Stats
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let op = Arc::new(op);
    let start_at = if warmup > Duration::ZERO {
        let warm = run_workers(
            concurrency,
            Limit::For(warmup),
            0,
            op.clone(),
            &ProgressBar::hidden(),
        )
        .await;
        warm.0
    } else {
        0
    };
    let bar = match limit {
        Limit::For(d) => progress(name, d.as_secs().max(1), "s"),
        Limit::Count(n) => progress(name, n, "req"),
    };
    let (_, stats) = run_workers(concurrency, limit, start_at, op, &bar).await;
    bar.finish_and_clear();
    Stats {
        name: name.to_owned(),
        ..stats
    }
}

async fn run_workers<F, Fut>(
    concurrency: usize,
    limit: Limit,
    start_at: u64,
    op: Arc<F>,
    bar: &ProgressBar,
) -> (u64, Stats)
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let shared = Arc::new(Shared::default());
    shared.next.store(start_at, Ordering::Relaxed);
    let started = Instant::now();
    let (deadline, end) = match limit {
        Limit::For(d) => (Some(started + d), u64::MAX),
        Limit::Count(n) => (None, start_at + n),
    };
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (shared, op) = (shared.clone(), op.clone());
        workers.spawn(async move {
            let mut latency = histogram();
            loop {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let i = shared.next.fetch_add(1, Ordering::Relaxed);
                if i >= end {
                    break;
                }
                let t0 = Instant::now();
                match op(i).await {
                    Ok(()) => {
                        latency.saturating_record(micros(t0.elapsed()));
                        shared.done.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => shared.error(e),
                }
            }
            latency
        });
    }
    let ticker = {
        let (bar, shared) = (bar.clone(), shared.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let done = shared.done.load(Ordering::Relaxed);
                match limit {
                    Limit::For(_) => {
                        bar.set_position(started.elapsed().as_secs());
                        bar.set_message(format!("{done} ok"));
                    }
                    Limit::Count(_) => bar.set_position(done),
                }
            }
        })
    };
    let mut latency = histogram();
    while let Some(worker) = workers.join_next().await {
        if let Ok(h) = worker {
            latency.add(h).expect("same bounds");
        }
    }
    let elapsed = started.elapsed();
    ticker.abort();
    let next = shared.next.load(Ordering::Relaxed);
    let first_error = shared.first_error.lock().expect("not poisoned").clone();
    (
        next,
        Stats {
            name: String::new(),
            ok: shared.done.load(Ordering::Relaxed),
            errors: shared.errors.load(Ordering::Relaxed),
            first_error,
            elapsed,
            latency,
        },
    )
}

/// Starts `op(i)` at `rate` per second for `duration`, without waiting for
/// earlier ones: the load does not back off when the service slows down.
pub async fn open_loop<F, Fut>(name: &str, rate: f64, duration: Duration, op: F) -> Stats
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let op = Arc::new(op);
    let total = (rate * duration.as_secs_f64()).round() as u64;
    let period = Duration::from_secs_f64(1.0 / rate);
    let shared = Arc::new(Shared::default());
    let latencies = Arc::new(Mutex::new(histogram()));
    let bar = progress(name, total, "req");
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..total {
        tokio::time::sleep_until((started + period.mul_f64(i as f64)).into()).await;
        let (op, shared, latencies) = (op.clone(), shared.clone(), latencies.clone());
        tasks.spawn(async move {
            let t0 = Instant::now();
            match op(i).await {
                Ok(()) => {
                    let us = micros(t0.elapsed());
                    latencies
                        .lock()
                        .expect("not poisoned")
                        .saturating_record(us);
                    shared.done.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => shared.error(e),
            }
        });
        if i % 64 == 0 {
            bar.set_position(i);
            // Reap finished tasks so the set stays small.
            while tasks.try_join_next().is_some() {}
        }
    }
    while tasks.join_next().await.is_some() {}
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    let latency = latencies.lock().expect("not poisoned").clone();
    let first_error = shared.first_error.lock().expect("not poisoned").clone();
    Stats {
        name: name.to_owned(),
        ok: shared.done.load(Ordering::Relaxed),
        errors: shared.errors.load(Ordering::Relaxed),
        first_error,
        elapsed,
        latency,
    }
}
