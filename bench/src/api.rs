//! The HTTP API scenarios against a running `webhooks-local`, and the
//! reference server measured with the same client and concurrency.

use std::sync::Arc;
use std::time::Duration;

use http::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use http::StatusCode;
use serde_json::Value;

use crate::load::{closed_loop, Limit, Stats};
use crate::receiver::Receiver;
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

/// One GET of the reference server, with the same client (and headers).
pub async fn reference_run(
    s: &Settings,
    api: &Api,
    reference: std::net::SocketAddr,
    label: &str,
) -> Stats {
    let url: Arc<str> = format!("http://{reference}/hello").into();
    let client = api.client.clone();
    closed_loop(
        label,
        s.concurrency,
        s.warmup,
        Limit::For(s.duration),
        move |_| {
            let (client, url) = (client.clone(), url.clone());
            async move {
                let response = client.get(&*url).send().await.map_err(|e| e.to_string())?;
                check(response, StatusCode::OK, "/hello").await.map(|_| ())
            }
        },
    )
    .await
}

pub async fn run(s: &Settings, api: &Api, receiver: &Receiver) -> Result<Vec<Stats>, String> {
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
    scenarios.push(create);

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

    let list = {
        let api = api.clone();
        closed_loop(
            "list (page of 20 of 1,000)",
            s.concurrency,
            s.warmup,
            Limit::For(s.duration),
            move |i| {
                let api = api.clone();
                async move {
                    api.get(
                        &format!("/webhooksubscription/all?page={}&size=20", i % pages),
                        StatusCode::OK,
                    )
                    .await
                    .map(|_| ())
                }
            },
        )
        .await
    };
    report_line(&list);
    scenarios.push(list);

    let get = {
        let (api, ids) = (api.clone(), ids.clone());
        closed_loop(
            "get subscription",
            s.concurrency,
            s.warmup,
            Limit::For(s.duration),
            move |i| {
                let api = api.clone();
                let path = format!("/webhooksubscription/{}", ids[i as usize % ids.len()]);
                async move { api.get(&path, StatusCode::OK).await.map(|_| ()) }
            },
        )
        .await
    };
    report_line(&get);
    scenarios.push(get);

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
    scenarios.push(seed);

    let get_message = {
        let api = api.clone();
        closed_loop(
            "get message",
            s.concurrency,
            s.warmup,
            Limit::For(s.duration),
            move |i| {
                let api = api.clone();
                let path = format!("/message/getmessagebyid/m-{}", i % messages);
                async move { api.get(&path, StatusCode::OK).await.map(|_| ()) }
            },
        )
        .await
    };
    report_line(&get_message);
    scenarios.push(get_message);
    Ok(scenarios)
}

pub fn report_line(stats: &Stats) {
    let s = stats.summary();
    println!(
        "  {:<30} {:>9.0}/s  p50 {:>8}  p90 {:>8}  p99 {:>8}  max {:>8}  ({} ok, {} errors)",
        s.name,
        s.per_second,
        crate::report::fmt_us(s.p50_us),
        crate::report::fmt_us(s.p90_us),
        crate::report::fmt_us(s.p99_us),
        crate::report::fmt_us(s.max_us),
        s.requests,
        s.errors
    );
    if let Some(e) = &stats.first_error {
        println!("    first error: {e}");
    }
}
