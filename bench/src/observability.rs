//! The cost of seeing inside (issue 23): get-subscription and end-to-end
//! (fan-out 10, closed loop) throughput of a `webhooks-local` with
//! Prometheus metrics served and scraped every second, spans exported over
//! OTLP, both, and both with every read's span exported too
//! (`OTEL_TRACES_SAMPLER=parentbased_always_on`), against both off, in one
//! run, the modes taken in turn twice so that drift of the machine falls on
//! each.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use webhook_core::auth::jwt::{mint_hs256, ALL_SCOPES};

use crate::api::Api;
use crate::e2e::{self, Pace};
use crate::http::{random_hex, start_service_with};
use crate::load::closed_loop;
use crate::receiver::Receiver;
use crate::Settings;

/// An OTLP/HTTP sink: answers every export, counts the bytes.
async fn otlp_sink() -> Result<(String, Arc<AtomicU64>), String> {
    let bytes = Arc::new(AtomicU64::new(0));
    let counted = bytes.clone();
    let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
        let counted = counted.clone();
        async move {
            counted.fetch_add(body.len() as u64, Ordering::Relaxed);
            ""
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((format!("http://{addr}"), bytes))
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// What a round turns on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Off,
    Metrics,
    Traces,
    Both,
    /// Both, and every API read's span exported too (by default a read is
    /// recorded only when its caller traces it).
    BothAllReads,
}

impl Mode {
    const ALL: [Mode; 5] = [
        Mode::Off,
        Mode::Metrics,
        Mode::Traces,
        Mode::Both,
        Mode::BothAllReads,
    ];

    fn label(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Metrics => "metrics",
            Mode::Traces => "traces",
            Mode::Both => "both",
            Mode::BothAllReads => "both, all reads traced",
        }
    }

    fn metrics(self) -> bool {
        matches!(self, Mode::Metrics | Mode::Both | Mode::BothAllReads)
    }

    fn traces(self) -> bool {
        matches!(self, Mode::Traces | Mode::Both | Mode::BothAllReads)
    }
}

struct Round {
    mode: Mode,
    get_per_second: f64,
    e2e_per_second: f64,
    scrapes: u64,
}

async fn round(s: &Settings, mode: Mode, sink: &str, receiver: &Receiver) -> Result<Round, String> {
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (key, secret) = (format!("bench-{}", random_hex(16)), random_hex(32));
    let metrics = format!("127.0.0.1:{}", free_port()?);
    let mut env = Vec::new();
    if mode.metrics() {
        env.push(("WEBHOOKS_METRICS_ADDR", metrics.clone()));
    }
    if mode.traces() {
        env.push(("OTEL_EXPORTER_OTLP_ENDPOINT", sink.to_owned()));
    }
    if mode == Mode::BothAllReads {
        env.push(("OTEL_TRACES_SAMPLER", "parentbased_always_on".to_owned()));
    }
    let service = start_service_with(s, data.path(), &key, &secret, &env)?;
    let token = mint_hs256(
        &secret,
        "org_id",
        e2e::ORG,
        &ALL_SCOPES,
        Duration::from_secs(86_400),
    );
    let api = Api::new(
        format!("http://{}/prod", service.addr),
        &key,
        &token,
        s.concurrency.max(s.e2e_concurrency) * 2,
    );
    // Prometheus's part: a scrape every second while the service is up.
    let scrapes = Arc::new(AtomicU64::new(0));
    let scraper = mode.metrics().then(|| {
        let (scrapes, url) = (scrapes.clone(), format!("http://{metrics}/metrics"));
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            loop {
                if let Ok(r) = client.get(&url).send().await {
                    if r.status().is_success() && r.bytes().await.is_ok() {
                        scrapes.fetch_add(1, Ordering::Relaxed);
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    });
    let label = mode.label();
    let ids = e2e::subscribe(&api, receiver, "dep-get", 100).await?;
    let get = {
        let (op_api, ids) = (api.clone(), ids.clone());
        closed_loop(
            &format!("get subscription, observability {label}"),
            s.concurrency,
            s.warmup,
            crate::load::Limit::For(s.duration),
            move |i| {
                let api = op_api.clone();
                let path = format!("/webhooksubscription/{}", ids[i as usize % ids.len()]);
                async move { api.get(&path, StatusCode::OK).await.map(|_| ()) }
            },
        )
        .await
    };
    if get.errors > 0 {
        return Err(format!(
            "get subscription: {} errors, first: {:?}",
            get.errors, get.first_error
        ));
    }
    let fan = e2e::subscribe(&api, receiver, "dep-fan", s.fan_out).await?;
    let run = e2e::scenario(
        &format!("e2e (fan-out {}), observability {label}", s.fan_out),
        &api,
        receiver,
        "dep-fan",
        &fan,
        Pace::Closed(s.e2e_concurrency),
        Duration::ZERO,
        s.duration,
    )
    .await?;
    if let Some(scraper) = scraper {
        scraper.abort();
    }
    drop(service);
    let summary = run.summary();
    let round = Round {
        mode,
        get_per_second: get.summary().per_second,
        e2e_per_second: summary.notifications_per_second,
        scrapes: scrapes.load(Ordering::Relaxed),
    };
    println!(
        "  observability {:<22}  get subscription {:>8.0}/s   e2e {:>8.0} notif/s ({}/{} received)   scrapes {}",
        label,
        round.get_per_second,
        round.e2e_per_second,
        summary.notifications_received,
        summary.notifications_expected,
        round.scrapes
    );
    Ok(round)
}

/// Each mode in turn, twice; prints each round and each mode's means
/// against off.
pub async fn run(s: &Settings) -> Result<(), String> {
    println!("\n== Observability: metrics served and scraped (1/s), spans exported (OTLP), both, and both with every read traced, vs all off");
    let (sink, exported) = otlp_sink().await?;
    let receiver = Receiver::start().await?;
    let mut rounds = Vec::new();
    for _ in 0..2 {
        for mode in Mode::ALL {
            rounds.push(round(s, mode, &sink, &receiver).await?);
        }
    }
    let mean = |mode: Mode, f: fn(&Round) -> f64| {
        let v: Vec<f64> = rounds.iter().filter(|r| r.mode == mode).map(f).collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    let (get_off, e2e_off) = (
        mean(Mode::Off, |r| r.get_per_second),
        mean(Mode::Off, |r| r.e2e_per_second),
    );
    println!("  mean: get subscription {get_off:.0}/s, e2e {e2e_off:.0} notif/s with all off");
    for mode in &Mode::ALL[1..] {
        let (get, e2e) = (
            mean(*mode, |r| r.get_per_second),
            mean(*mode, |r| r.e2e_per_second),
        );
        println!(
            "  mean: {:<22} get subscription {get:.0}/s ({:+.1} %), e2e {e2e:.0} notif/s ({:+.1} %)",
            mode.label(),
            100.0 * (get / get_off - 1.0),
            100.0 * (e2e / e2e_off - 1.0),
        );
    }
    println!(
        "  {} KiB of OTLP exported",
        exported.load(Ordering::Relaxed) / 1024
    );
    Ok(())
}
