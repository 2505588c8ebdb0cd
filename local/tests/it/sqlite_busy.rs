//! A SQLite file whose write lock another process holds: `webhooks-local`
//! answers what needs a write `503 STORE_UNAVAILABLE` with `Retry-After`
//! (as DynamoDB's throttling is answered), never a 500, serves what only
//! reads, and recovers once the lock is released, losing nothing it had
//! accepted.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use http::StatusCode;
use reqwest::Method;
use serde_json::{json, Value};
use webhook_core::notification::notification_id;

const WAIT: Duration = Duration::from_secs(60);

/// Status, `Retry-After` and body; any answer is problem+json when not a
/// success, and never a 5xx other than 503.
async fn answer(req: reqwest::RequestBuilder) -> (StatusCode, Option<String>, Value) {
    let resp = req.send().await.expect("request reaches the server");
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let body: Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap_or(Value::Null);
    assert!(
        status.as_u16() < 500 || status == StatusCode::SERVICE_UNAVAILABLE,
        "{status}: {body}"
    );
    (status, retry_after, body)
}

fn event(id: &str) -> Value {
    json!({"eventId": id, "type": "contact.created", "organizationId": "org-1",
           "departmentId": "dep-1", "occurredAt": 1_700_000_000_000i64, "contact": {"id": id}})
}

fn assert_store_unavailable(
    what: &str,
    (status, retry_after, body): (StatusCode, Option<String>, Value),
) {
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("STORE_UNAVAILABLE")),
        "{what}: {body}"
    );
    let seconds: u64 = retry_after
        .unwrap_or_else(|| panic!("{what}: a 503 without Retry-After"))
        .parse()
        .unwrap();
    assert!(seconds > 0, "{what}");
}

#[tokio::test]
async fn a_locked_database_is_a_503_with_retry_after_and_nothing_accepted_is_lost() {
    // A short delivery timeout: a delivery whose outcome could not be written
    // while locked is leased again soon after (2 × timeout + 5 s).
    let server = Server::start_on_sqlite(&[("WEBHOOKS_DELIVERY_TIMEOUT_MS", "1000")]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let filter = contact("org-1", "dep-1");
    let (status, first) = server.create("org-1", &inbox.uri("/a"), &[&filter]).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let id = first["id"].as_str().unwrap().to_owned();
    let post = |id: &str| {
        server
            .req(Method::POST, "/events", "org-1")
            .json(&event(id))
    };
    let (status, _, body) = answer(post("evt-before")).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    // Another process's write lock (the sqlite3 shell, a backup), held.
    let outsider = rusqlite::Connection::open(server.sqlite_file()).unwrap();
    outsider.execute_batch("BEGIN EXCLUSIVE").unwrap();

    let create =
        json!({"uri": inbox.uri("/b"), "eventFilters": [&filter], "expiresDateInMillies": 0});
    assert_store_unavailable(
        "create",
        answer(
            server
                .req(Method::POST, "/webhooksubscription", "org-1")
                .json(&create),
        )
        .await,
    );
    assert_store_unavailable("event", answer(post("evt-during")).await);
    assert_store_unavailable(
        "delete",
        answer(server.req(
            Method::DELETE,
            &format!("/webhooksubscription/{id}"),
            "org-1",
        ))
        .await,
    );
    // Reads go on: in WAL mode a reader sees the last commit and never
    // waits for the writer, so the lock does not touch them.
    let (status, _, got) =
        answer(server.req(Method::GET, &format!("/webhooksubscription/{id}"), "org-1")).await;
    assert_eq!(
        (status, got["id"].as_str()),
        (StatusCode::OK, Some(id.as_str())),
        "{got}"
    );
    let (status, _, page) =
        answer(server.req(Method::GET, "/webhooksubscription/all", "org-1")).await;
    assert_eq!(
        (status, page["totalElements"].as_u64()),
        (StatusCode::OK, Some(1)),
        "{page}"
    );

    outsider.execute_batch("COMMIT").unwrap();
    drop(outsider);

    // Recovered: the refused requests succeed when sent again.
    let (status, _, second) = answer(
        server
            .req(Method::POST, "/webhooksubscription", "org-1")
            .json(&create),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{second}");
    let (status, _, body) = answer(post("evt-during")).await;
    assert_eq!(
        (status, body["notifications"].as_u64()),
        (StatusCode::ACCEPTED, Some(2)),
        "{body}"
    );
    // What was accepted arrives: the event before the lock (whose delivery
    // may have met the lock) to the first subscription, the one after to both.
    let b = second["id"].as_str().unwrap();
    let expected: BTreeSet<String> = [
        ("evt-before", id.as_str()),
        ("evt-during", id.as_str()),
        ("evt-during", b),
    ]
    .into_iter()
    .map(|(event, subscription)| notification_id(event, subscription).to_string())
    .collect();
    let got = inbox.wait_for_unique(3, WAIT).await;
    let arrived: BTreeSet<String> = got
        .iter()
        .map(|n| n.header("webhook-id").to_owned())
        .collect();
    assert_eq!(arrived, expected);
}
