//! A burst for one subscription (issue 36): `--burst-events` events posted
//! at once for one subscription whose callback is nginx answering `200` at
//! once; notifications/s from the first event posted to the last POST
//! nginx answered, as a ratio to nginx's own `POST` rate measured in the
//! same run (the same client, `--concurrency` connections). A
//! `webhooks-local` of its own on SQLite, default settings. Then the same for
//! an ordered subscription (`--burst-ordered-events`, one call at a time:
//! the throughput one ordered subscription reaches). Printed only.
//!
//! The lease's cost ([`lease_cost`]): the SQLite queue's `receive` timed
//! with 1,000 and 100,000 due jobs of one subscription that holds its cap,
//! beside one due job of another subscription that each lease must find.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::StatusCode;
use webhook_core::auth::jwt::{mint_hs256, ALL_SCOPES};
use webhook_core::queue::{DeliveryJob, DeliveryQueue};
use webhook_core::sqlite::SqliteDb;

use crate::api::{event_body, inbound_filter, Api};
use crate::load::{closed_loop, Limit};
use crate::process::{self, Listening};
use crate::Settings;

const ORG: &str = "bench-burst";
const DEP: &str = "dep-burst";
const ORDERED_DEP: &str = "dep-burst-ordered";

/// `webhooks-local serve` on SQLite with the defaults.
fn start_service(
    s: &Settings,
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
        .env_remove("WEBHOOKS_BACKEND")
        .env("WEBHOOKS_API_KEYS", key)
        .env("WEBHOOKS_JWT_HS256_SECRET", secret)
        .env("RUST_LOG", &s.server_log)
        .stderr(log);
    Listening::spawn(command, "webhooks-local listening on ")
        .map_err(|e| format!("{e} (build it with `cargo build --release -p webhooks-local`)"))
}

pub async fn run(s: &Settings) -> Result<(), String> {
    let Some(nginx) = crate::nginx::binary() else {
        return Err("no nginx on PATH or in /usr/sbin: the burst's callback and reference".into());
    };
    let callback = crate::nginx::StaticFile::callback(&nginx)?;
    let url = format!("http://{}{}", callback.addr, callback.path);

    // The reference: nginx's POST rate, same client, same connections.
    let body = event_body(ORG, DEP, "reference", "reference");
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(s.concurrency)
        .tcp_nodelay(true)
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())?;
    let op = {
        let (client, url, body) = (client.clone(), url.clone(), body.clone());
        move |_| {
            let (client, url, body) = (client.clone(), url.clone(), body.clone());
            async move {
                let r = client
                    .post(&url)
                    .body(body)
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                match r.status() {
                    StatusCode::OK => r.bytes().await.map(drop).map_err(|e| e.to_string()),
                    other => Err(format!("nginx answered {other}")),
                }
            }
        }
    };
    let reference = closed_loop(
        "nginx POST",
        s.concurrency,
        s.warmup,
        Limit::For(s.duration),
        op,
    )
    .await;
    let reference_rate = reference.ok as f64 / reference.elapsed.as_secs_f64();
    println!(
        "  reference: nginx answered {:.0} POST/s ({} connections)",
        reference_rate, s.concurrency
    );

    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let hex = || uuid::Uuid::new_v4().simple().to_string();
    let (key, secret) = (format!("bench-{}", hex()), format!("{}{}", hex(), hex()));
    let service = start_service(s, data.path(), &key, &secret)?;
    let base = format!("http://{}/prod", service.addr);
    let token = mint_hs256(
        &secret,
        "org_id",
        ORG,
        &ALL_SCOPES,
        Duration::from_secs(86_400),
    );
    let api = Arc::new(Api::new(base, &key, &token, 32));
    api.create(&url, &inbound_filter(ORG, DEP)).await?;

    let phase = Phase {
        api: &api,
        callback: &callback,
        dep: DEP,
        reference_rate,
        senders: s.burst_senders,
    };
    phase.run("burst", s.burst_events).await;
    if s.burst_ordered_events > 0 {
        let body = serde_json::json!({"uri": format!("{url}?ordered"),
            "eventFilters": [inbound_filter(ORG, ORDERED_DEP)], "ordered": true});
        api.post("/webhooksubscription", body.to_string(), StatusCode::OK)
            .await?;
        let ordered = Phase {
            dep: ORDERED_DEP,
            ..phase
        };
        ordered.run("ordered", s.burst_ordered_events).await;
    }
    drop(service);
    Ok(())
}

/// `--lease-jobs` counts of due jobs of one subscription holding its cap,
/// and one due job of another: the time of one `receive` (which must lease
/// that other job) on the SQLite queue, averaged over `LEASES`.
pub async fn lease_cost(s: &Settings) -> Result<(), String> {
    const LEASES: usize = 200;
    const CAP: usize = 32;
    for &depth in &s.lease_jobs {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let db = SqliteDb::open(&dir.path().join("lease.db")).map_err(|e| e.to_string())?;
        let job = |sub: &str, n: usize| {
            DeliveryJob::new(
                format!("{sub}-{n:09}").into(),
                "org-busy".into(),
                sub.into(),
                format!(r#"{{"n":{n}}}"#),
                1_700_000_000_000 + n as i64,
            )
        };
        for chunk in (0..depth).collect::<Vec<_>>().chunks(5_000) {
            let jobs = chunk.iter().map(|&n| job("busy", n)).collect();
            db.enqueue(jobs).await.map_err(|e| e.to_string())?;
        }
        let long = Duration::from_secs(3600);
        // The busy subscription takes its cap, and keeps it.
        let held = db
            .receive(CAP, CAP, long)
            .await
            .map_err(|e| e.to_string())?;
        let mut spent = Duration::ZERO;
        let mut found = 0;
        for i in 0..LEASES {
            let mut other = job("other", i);
            other.org_id = "org-other".into();
            db.enqueue(vec![other]).await.map_err(|e| e.to_string())?;
            let t0 = Instant::now();
            let leases = db
                .receive(256, CAP, long)
                .await
                .map_err(|e| e.to_string())?;
            spent += t0.elapsed();
            for lease in &leases {
                if lease.job.subscription_id.as_str() == "other" {
                    found += 1;
                }
                db.complete(lease).await.map_err(|e| e.to_string())?;
            }
        }
        println!(
            "  lease: {depth} due jobs of a subscription holding its cap of {} ({} held): {:.1} µs per receive, the other subscription's job leased {found} times of {LEASES}",
            CAP,
            held.len(),
            spent.as_secs_f64() * 1e6 / LEASES as f64,
        );
    }
    Ok(())
}

/// One phase of the burst: events of `dep` posted at once, delivered to the callback.
#[derive(Clone, Copy)]
struct Phase<'a> {
    api: &'a Arc<Api>,
    callback: &'a crate::nginx::StaticFile,
    dep: &'a str,
    reference_rate: f64,
    senders: usize,
}

impl Phase<'_> {
    async fn run(&self, label: &str, n: u64) {
        let before = self.callback.posts();
        let hex = uuid::Uuid::new_v4().simple().to_string();
        let prefix = format!("{label}-{hex}-");
        let (api, dep) = (self.api.clone(), self.dep.to_owned());
        let op = move |i: u64| {
            let api = api.clone();
            let event_id = format!("{prefix}{i}");
            let body = event_body(ORG, &dep, &event_id, &event_id);
            async move {
                api.post("/events", body, StatusCode::ACCEPTED)
                    .await
                    .map(drop)
            }
        };
        let started = Instant::now();
        let senders = self.senders;
        let posted = closed_loop(
            &format!("{label}: posting"),
            senders,
            Duration::ZERO,
            Limit::Count(n),
            op,
        )
        .await;
        let posting = started.elapsed();
        let delivered = || self.callback.posts() - before;
        let backlog = posted.ok.saturating_sub(delivered());
        let deadline = Instant::now() + Duration::from_secs(600);
        while delivered() < posted.ok && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let elapsed = started.elapsed();
        let got = delivered();
        let rate = got as f64 / elapsed.as_secs_f64();
        let drain = elapsed.saturating_sub(posting).as_secs_f64();
        println!(
            "  {label}: {} events posted in {:.1} s by {senders} senders ({} errors), {backlog} not yet delivered then (drained in {drain:.1} s); {} notifications delivered in {:.1} s: {:.0}/s, {:.3} of nginx's POST rate",
            posted.ok,
            posting.as_secs_f64(),
            posted.errors,
            got,
            elapsed.as_secs_f64(),
            rate,
            rate / self.reference_rate
        );
    }
}
