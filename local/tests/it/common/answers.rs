//! Requests to the server and its answers: every error checked as problem+json with a code,
//! never a 5xx; a producer that honours `503` + `Retry-After`; the filters of the tests.

use http::StatusCode;
use serde_json::{json, Value};

use super::Server;

/// Sends and returns status and JSON body (Null when empty). Checks that
/// every error is problem+json with a code.
pub async fn send(req: reqwest::RequestBuilder) -> (StatusCode, Value) {
    answer(req.send().await.expect("request reaches the server")).await
}

/// An answer's status and JSON body, checked as [`send`] checks it.
pub async fn answer(resp: reqwest::Response) -> (StatusCode, Value) {
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap();
    let content_type = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let bytes = resp.bytes().await.unwrap();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).expect("JSON body")
    };
    if !status.is_success() {
        assert_eq!(content_type, "application/problem+json", "{status} {body}");
        assert!(
            body["code"].is_string() && body["status"] == status.as_u16(),
            "{body}"
        );
    }
    assert!(status.as_u16() < 500, "server error {status}: {body}");
    (status, body)
}

/// POSTs an event as a producer that honours `503` + `Retry-After` does:
/// waits and sends it again (ingestion is idempotent per event id), so a
/// burst that outruns a slow emulator still ends with the event accepted.
pub async fn produce(server: &Server, org: &str, event: &Value) -> StatusCode {
    // Up to about 2.5 minutes of 503s (Retry-After: 5): a moto starved of
    // CPU on a busy 2-core machine can stay that slow during a burst.
    for _ in 0..TRIES {
        let response = server
            .req(reqwest::Method::POST, "/events", org)
            .json(event)
            .send()
            .await
            .expect("POST /events");
        if response.status() != StatusCode::SERVICE_UNAVAILABLE {
            let status = response.status();
            let body = response.text().await.unwrap_or_default();
            assert!(status.as_u16() < 500, "server error {status}: {body}");
            return status;
        }
        let wait: u64 = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .expect("a 503 says when to retry");
        tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
    }
    panic!("POST /events still unavailable after {TRIES} tries");
}

const TRIES: usize = 30;

/// Asserts a `400 VALIDATION_FAILED` problem whose first error names `field`.
pub fn assert_invalid(status: StatusCode, body: &Value, field: &str, context: &str) {
    assert_eq!(
        (
            status,
            body["code"].as_str(),
            body["errors"][0]["field"].as_str()
        ),
        (
            StatusCode::BAD_REQUEST,
            Some("VALIDATION_FAILED"),
            Some(field)
        ),
        "{context}: {body}"
    );
}

pub fn inbound(org: &str, dep: &str) -> String {
    format!("/orgId/{org}/department/{dep}/message?direction=inbound")
}

pub fn contact(org: &str, dep: &str) -> String {
    format!("/orgId/{org}/department/{dep}/contact")
}

/// Creates (or updates) `org`'s subscription of `uri` to `filter`, with `extra`'s members in
/// the body (the field under test).
pub async fn post_subscription(
    server: &Server,
    org: &str,
    uri: &str,
    filter: String,
    extra: Value,
) -> (StatusCode, Value) {
    let mut body = json!({"uri": uri, "eventFilters": [filter]});
    for (k, v) in extra.as_object().expect("extra is an object") {
        body[k] = v.clone();
    }
    send(
        server
            .req(reqwest::Method::POST, "/webhooksubscription", org)
            .json(&body),
    )
    .await
}

/// What get and list show of subscription `id`'s `field`: they must agree.
pub async fn shown_field(server: &Server, org: &str, id: &str, field: &str) -> Value {
    let (_, got) = server.get(&format!("/webhooksubscription/{id}"), org).await;
    let (_, list) = server.get("/webhooksubscription/all", org).await;
    let listed = list["content"]
        .as_array()
        .expect("a page's content")
        .iter()
        .find(|s| s["id"] == id)
        .cloned()
        .expect("the subscription is listed");
    assert_eq!(got[field], listed[field], "get and list agree on {field}");
    got[field].clone()
}
