//! The HTTP API scenarios against a running `webhooks-local`, and the
//! reference server measured with the same client and concurrency.

use std::sync::Arc;
use std::time::Duration;

use http::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use http::StatusCode;
use serde::Serialize;
use serde_json::Value;

use crate::load::{closed_loop, Limit, Stats, Summary};
use crate::receiver::Receiver;
use crate::report::{fmt_us, left, right, LatencyBars, Section, Table, Target};
use crate::Settings;

/// A client for one organization: keep-alive connections, the API key and
/// the organization's bearer token on every request.
#[derive(Clone)]
pub struct Api {
    pub client: reqwest::Client,
    /// `http://ADDR/prod`
    pub base: String,
}

impl Api {
    pub fn new(base: String, api_key: &str, token: &str, pool: usize) -> Api {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-api-key",
            HeaderValue::from_str(api_key).expect("ascii key"),
        );
        headers.insert(
            AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {token}")).expect("ascii token"),
        );
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .pool_max_idle_per_host(pool)
            .tcp_nodelay(true)
            .no_proxy()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("a plain HTTP client");
        Api { client, base }
    }

    pub async fn get(&self, path: &str, expect: StatusCode) -> Result<bytes::Bytes, String> {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .map_err(|e| format!("GET {path}: {e}"))?;
        check(response, expect, path).await
    }

    pub async fn post(
        &self,
        path: &str,
        body: String,
        expect: StatusCode,
    ) -> Result<bytes::Bytes, String> {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| format!("POST {path}: {e}"))?;
        check(response, expect, path).await
    }

    /// Creates (or updates) a subscription of `filter` to `uri`; its id.
    pub async fn create(&self, uri: &str, filter: &str) -> Result<String, String> {
        let body = self
            .post(
                "/webhooksubscription",
                create_body(uri, filter),
                StatusCode::OK,
            )
            .await?;
        let v: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        v["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("no id in {v}"))
    }
}

async fn check(
    response: reqwest::Response,
    expect: StatusCode,
    path: &str,
) -> Result<bytes::Bytes, String> {
    let status = response.status();
    let body = response
        .bytes()
        .await
        .map_err(|e| format!("{path}: reading the body: {e}"))?;
    if status != expect {
        return Err(format!(
            "{path}: status {status}, expected {expect}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        ));
    }
    Ok(body)
}

pub fn create_body(uri: &str, filter: &str) -> String {
    serde_json::json!({"uri": uri, "eventFilters": [filter], "expiresDateInMillies": 0}).to_string()
}

/// A `message.inbound` event of `org`/`dep` with event id `event_id` and message id `message_id`.
pub fn event_body(org: &str, dep: &str, event_id: &str, message_id: &str) -> String {
    format!(
        r#"{{"eventId":"{event_id}","type":"message.inbound","organizationId":"{org}","departmentId":"{dep}","message":{{"id":"{message_id}","to":["+15550100"],"from":"+15550199","text":"benchmark message {message_id}"}},"carrierMessageId":"carrier-{message_id}","status":"RECEIVED"}}"#
    )
}

pub fn inbound_filter(org: &str, dep: &str) -> String {
    format!("/orgId/{org}/department/{dep}/message?direction=inbound")
}

/// The organization of the API scenarios.
pub const ORG: &str = "bench";

/// The URL of the hello-world reference server.
fn hello(reference: std::net::SocketAddr) -> String {
    format!("http://{reference}/hello")
}

/// The op of a reference: one GET of `url` (the hello-world server, or the
/// static file of the list scenario), with the same client (and headers) as
/// the service's scenarios.
fn reference_op(
    api: &Api,
    url: &str,
) -> impl Fn(u64) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>
       + Send
       + Sync
       + 'static {
    let url: Arc<str> = url.into();
    let client = api.client.clone();
    move |_| {
        let (client, url) = (client.clone(), url.clone());
        Box::pin(async move {
            let response = client.get(&*url).send().await.map_err(|e| e.to_string())?;
            check(response, StatusCode::OK, &url).await.map(|_| ())
        })
    }
}

pub async fn reference_run(
    s: &Settings,
    api: &Api,
    reference: std::net::SocketAddr,
    label: &str,
) -> Stats {
    closed_loop(
        label,
        s.concurrency,
        s.warmup,
        Limit::For(s.duration),
        reference_op(api, &hello(reference)),
    )
    .await
}

/// Slices of each side in a paired measurement.
const ROUNDS: u32 = 8;

/// A timed scenario measured in alternation with the reference (8 slices
/// each, in the order R S S R R S S R ...), so both see the same machine, however busy
/// it is. Returns the scenario and its paired reference (a GET of `reference`).
pub async fn paired<F, Fut>(
    s: &Settings,
    api: &Api,
    reference: &str,
    name: &str,
    op: F,
) -> (Stats, Stats)
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
{
    let op = Arc::new(op);
    let reference_op = Arc::new(reference_op(api, reference));
    let slice = s.duration / ROUNDS;
    let (mut scenario, mut paired_reference) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let warmup = if round == 0 { s.warmup } else { Duration::ZERO };
        for side in [round % 2 == 0, round % 2 == 1] {
            if side {
                let r = reference_op.clone();
                paired_reference.push(
                    closed_loop(
                        &format!("{name}: reference {}/{ROUNDS}", round + 1),
                        s.concurrency,
                        warmup,
                        Limit::For(slice),
                        move |i| r(i),
                    )
                    .await,
                );
            } else {
                let o = op.clone();
                scenario.push(
                    closed_loop(
                        &format!("{name} {}/{ROUNDS}", round + 1),
                        s.concurrency,
                        warmup,
                        Limit::For(slice),
                        move |i| o(i),
                    )
                    .await,
                );
            }
        }
    }
    (
        merge(name, scenario),
        merge(&format!("reference paired with {name}"), paired_reference),
    )
}

fn merge(name: &str, parts: Vec<Stats>) -> Stats {
    let mut latency = crate::load::histogram();
    let (mut ok, mut errors, mut elapsed, mut first_error) = (0, 0, Duration::ZERO, None);
    for p in parts {
        latency.add(&p.latency).expect("same bounds");
        ok += p.ok;
        errors += p.errors;
        elapsed += p.elapsed;
        first_error = first_error.or(p.first_error);
    }
    Stats {
        name: name.to_owned(),
        ok,
        errors,
        first_error,
        elapsed,
        latency,
    }
}

/// The scenarios; the timed ones come with their paired reference.
pub struct Scenario {
    pub stats: Stats,
    pub reference: Option<Stats>,
}

pub async fn run(
    s: &Settings,
    api: &Api,
    receiver: &Receiver,
    reference: std::net::SocketAddr,
) -> Result<Vec<Scenario>, String> {
    let mut scenarios = Vec::new();

    // Create: each one runs the handshake against the local receiver. Creating
    // exactly `subscriptions` of them seeds the list scenario's organization.
    let filter = inbound_filter(ORG, "dep-list");
    let receiver_base: Arc<str> = receiver.uri("/sub/").into();
    let create = {
        let (api, filter, receiver_base) = (api.clone(), filter.clone(), receiver_base.clone());
        closed_loop(
            "create subscription",
            s.concurrency,
            Duration::ZERO,
            Limit::Count(s.subscriptions),
            move |i| {
                let (api, body) = (
                    api.clone(),
                    create_body(&format!("{receiver_base}{i}"), &filter),
                );
                async move {
                    api.post("/webhooksubscription", body, StatusCode::OK)
                        .await
                        .map(|_| ())
                }
            },
        )
        .await
    };
    report_line(&create);
    scenarios.push(Scenario {
        stats: create,
        reference: None,
    });

    let page: Value = serde_json::from_slice(
        &api.get("/webhooksubscription/all?size=2000", StatusCode::OK)
            .await?,
    )
    .map_err(|e| e.to_string())?;
    let ids: Arc<Vec<String>> = Arc::new(
        page["content"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
    );
    if ids.is_empty() {
        return Err("no subscriptions were created".into());
    }
    let pages = (ids.len() as u64).div_ceil(20).max(1);
    let hello = hello(reference);

    let list = {
        let op_api = api.clone();
        paired(s, api, &hello, "list (page of 20 of 1,000)", move |i| {
            let api = op_api.clone();
            async move {
                api.get(
                    &format!("/webhooksubscription/all?page={}&size=20", i % pages),
                    StatusCode::OK,
                )
                .await
                .map(|_| ())
            }
        })
        .await
    };
    scenarios.push(paired_scenario(list));

    match list_vs_static_file(s, api).await {
        Ok(Some(scenario)) => scenarios.push(scenario),
        Ok(None) => println!("  {LIST_VS_NGINX}: not measured (no nginx on PATH or in /usr/sbin)"),
        Err(e) => return Err(format!("{LIST_VS_NGINX}: {e}")),
    }

    let get = {
        let (op_api, ids) = (api.clone(), ids.clone());
        paired(s, api, &hello, "get subscription", move |i| {
            let api = op_api.clone();
            let path = format!("/webhooksubscription/{}", ids[i as usize % ids.len()]);
            async move { api.get(&path, StatusCode::OK).await.map(|_| ()) }
        })
        .await
    };
    scenarios.push(paired_scenario(get));

    // Messages are seeded through the event endpoint (no subscriber in this department).
    let messages = s.messages;
    let seed = {
        let api = api.clone();
        closed_loop(
            "ingest event (0 subscribers)",
            s.concurrency,
            Duration::ZERO,
            Limit::Count(messages),
            move |i| {
                let api = api.clone();
                let body = event_body(ORG, "dep-msg", &format!("seed-{i}"), &format!("m-{i}"));
                async move {
                    api.post("/events", body, StatusCode::ACCEPTED)
                        .await
                        .map(|_| ())
                }
            },
        )
        .await
    };
    report_line(&seed);
    scenarios.push(Scenario {
        stats: seed,
        reference: None,
    });

    let get_message = {
        let op_api = api.clone();
        paired(s, api, &hello, "get message", move |i| {
            let api = op_api.clone();
            let path = format!("/message/getmessagebyid/m-{}", i % messages);
            async move { api.get(&path, StatusCode::OK).await.map(|_| ()) }
        })
        .await
    };
    scenarios.push(paired_scenario(get_message));
    Ok(scenarios)
}

/// The scenario of one list page beside nginx serving its bytes as a file.
pub const LIST_VS_NGINX: &str = "list page 7 vs nginx, same bytes";

/// The page of issue 26: 20 of the 1,000 subscriptions, newest first.
const NGINX_PAGE: &str = "/webhooksubscription/all?page=7&size=20&sort=createdDateTime,desc";

/// One list page against the same bytes as a static file served by nginx,
/// measured in alternation (like the other timed scenarios): the share of
/// what serving those bytes allows that the list reaches. `None` without nginx.
async fn list_vs_static_file(s: &Settings, api: &Api) -> Result<Option<Scenario>, String> {
    let Some(nginx) = crate::nginx::binary() else {
        return Ok(None);
    };
    let body = api.get(NGINX_PAGE, StatusCode::OK).await?;
    let file = crate::nginx::StaticFile::serve(&nginx, &body)?;
    let url = format!("http://{}{}", file.addr, file.path);
    let served = api
        .client
        .get(&url)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let served = check(served, StatusCode::OK, &url).await?;
    if served != body {
        return Err(format!(
            "nginx served {} bytes, not the page's {}",
            served.len(),
            body.len()
        ));
    }
    println!("  the page: {} bytes, served by nginx at {url}", body.len());
    let op_api = api.clone();
    let pair = paired(s, api, &url, LIST_VS_NGINX, move |_| {
        let api = op_api.clone();
        async move { api.get(NGINX_PAGE, StatusCode::OK).await.map(|_| ()) }
    })
    .await;
    Ok(Some(paired_scenario(pair)))
}

fn paired_scenario((stats, reference): (Stats, Stats)) -> Scenario {
    report_line(&stats);
    report_line(&reference);
    Scenario {
        stats,
        reference: Some(reference),
    }
}

pub fn report_line(stats: &Stats) {
    let s = stats.summary();
    println!(
        "  {:<30} {:>9.0}/s  p50 {:>8}  p90 {:>8}  p99 {:>8}  max {:>8}  ({} ok, {} errors)",
        s.name,
        s.per_second,
        fmt_us(s.p50_us),
        fmt_us(s.p90_us),
        fmt_us(s.p99_us),
        fmt_us(s.max_us),
        s.requests,
        s.errors
    );
    if let Some(e) = &stats.first_error {
        println!("    first error: {e}");
    }
}

// ---------------------------------------------------------------------------
// Results: each scenario beside the reference, the targets, the table.

/// The average of the reference runs (throughput and each percentile).
pub fn average_reference(runs: &[Summary]) -> Option<Summary> {
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

/// One scenario's figures and their ratios to the reference's.
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

impl ApiRow {
    /// Timed scenarios divide by the reference slices interleaved with them;
    /// the others by `average`, the average of the reference runs.
    pub fn new(scenario: &Scenario, average: &Summary) -> ApiRow {
        let summary = scenario.stats.summary();
        let paired = scenario.reference.as_ref().map(|r| r.summary());
        let divisor = paired.as_ref().unwrap_or(average);
        ApiRow {
            throughput_ratio: summary.per_second / divisor.per_second.max(1e-9),
            p50_ratio: summary.p50_us as f64 / divisor.p50_us.max(1) as f64,
            p99_ratio: summary.p99_us as f64 / divisor.p99_us.max(1) as f64,
            reference_per_second: divisor.per_second,
            paired_reference: paired,
            summary,
        }
    }
}

/// Get message and get subscription: at least half the reference's requests/s;
/// a list page at least 0.3 of nginx serving its bytes (issue 26).
pub fn targets(rows: &[ApiRow]) -> Vec<Target> {
    let mut targets: Vec<Target> = ["get message", "get subscription"]
        .into_iter()
        .map(|name| throughput_target(rows, name))
        .collect();
    targets.push(list_vs_nginx_target(rows));
    targets
}

fn list_vs_nginx_target(rows: &[ApiRow]) -> Target {
    let target = "list page of 20 of 1,000: requests/s vs nginx serving the same bytes";
    let goal = "≥ 0.3";
    match rows.iter().find(|r| r.summary.name == LIST_VS_NGINX) {
        Some(r) => Target {
            target: target.into(),
            goal: goal.into(),
            measured: format!(
                "{:.2} ({:.0}/s vs {:.0}/s)",
                r.throughput_ratio, r.summary.per_second, r.reference_per_second
            ),
            met: Some(r.throughput_ratio >= 0.3),
        },
        None => Target::not_measured(target, goal),
    }
}

fn throughput_target(rows: &[ApiRow], name: &str) -> Target {
    let target = format!("{name}: requests/s vs the reference server");
    let goal = "≥ 50 %";
    match rows.iter().find(|r| r.summary.name == name) {
        Some(r) => Target {
            target,
            goal: goal.into(),
            measured: format!(
                "{:.0} %  ({:.0}/s vs {:.0}/s)",
                r.throughput_ratio * 100.0,
                r.summary.per_second,
                r.reference_per_second
            ),
            met: Some(r.throughput_ratio >= 0.5),
        },
        None => Target::not_measured(&target, goal),
    }
}

/// The settings the HTTP API table was measured with.
pub struct Load {
    pub concurrency: usize,
    pub duration_s: f64,
    pub warmup_s: f64,
}

/// The reference runs, their average, then each scenario.
pub fn section(
    load: &Load,
    reference_runs: &[Summary],
    average: &Summary,
    rows: &[ApiRow],
) -> Section {
    let mut table = Table::new([
        left("scenario"),
        right("requests/s"),
        right("reference req/s"),
        right("× reference"),
        right("p50"),
        right("p90"),
        right("p99"),
        right("max"),
        right("p50 × ref"),
        right("errors"),
    ]);
    for run in reference_runs.iter().chain([average]) {
        table.row_with_blanks(reference_cells(run));
    }
    for row in rows {
        table.row(scenario_cells(row));
    }
    Section::table("HTTP API", table).with_intro(format!(
        "{} keep-alive connections (closed loop), {} s per scenario after {} s of \
         warm-up. The reference is a hello-world axum server in its own process, driven by the \
         same client with the same headers and concurrency. The timed scenarios (list, gets) \
         are measured in 8 alternating slices each with the reference (R S S R R S ...), and each is \
         divided by its own slices; create and ingest divide by the average of the reference \
         runs taken before and after everything. `{LIST_VS_NGINX}` is paired instead with nginx \
         serving the bytes of that page as a file (when nginx is installed).",
        load.concurrency, load.duration_s, load.warmup_s
    ))
}

/// A reference run has no reference and no ratios: those cells stay blank.
fn reference_cells(run: &Summary) -> Vec<Option<String>> {
    vec![
        Some(run.name.clone()),
        Some(format!("{:.0}", run.per_second)),
        None,
        None,
        Some(fmt_us(run.p50_us)),
        Some(fmt_us(run.p90_us)),
        Some(fmt_us(run.p99_us)),
        Some(fmt_us(run.max_us)),
        None,
        Some(run.errors.to_string()),
    ]
}

fn scenario_cells(row: &ApiRow) -> Vec<String> {
    let a = &row.summary;
    let divisor = if row.paired_reference.is_some() {
        "paired"
    } else {
        "average"
    };
    vec![
        a.name.clone(),
        format!("{:.0}", a.per_second),
        format!("{:.0} ({divisor})", row.reference_per_second),
        format!("**{:.2}**", row.throughput_ratio),
        fmt_us(a.p50_us),
        fmt_us(a.p90_us),
        fmt_us(a.p99_us),
        fmt_us(a.max_us),
        format!("{:.2}", row.p50_ratio),
        a.errors.to_string(),
    ]
}

/// The average reference, then each scenario.
pub fn latency_bars(average: Option<&Summary>, rows: &[ApiRow]) -> Vec<LatencyBars> {
    average
        .into_iter()
        .chain(rows.iter().map(|r| &r.summary))
        .map(|s| LatencyBars::new(s.name.clone(), [s.p50_us, s.p90_us, s.p99_us]))
        .collect()
}
