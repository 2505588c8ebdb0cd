//! Delivery history end to end through `webhooks-local` (SQLite, or DynamoDB
//! Local + moto with `WEBHOOKS_TEST_BACKEND=aws`): a receiver that answers
//! 500 with an HTML body, its attempts, FAILED after the schedule, resend,
//! recover, stats, and 404 for another organization on every endpoint.

use crate::common;

use std::time::Duration;

use common::*;
use http::StatusCode;
use reqwest::Method;
use serde_json::{json, Value};

/// Three attempts, then FAILED.
const SHORT_SCHEDULE: (&str, &str) = ("WEBHOOKS_RETRY_SCHEDULE", "100ms,100ms");
/// These tests watch notifications fail through the whole schedule: the
/// circuit breaker, which would hold them after 5 failures in a row, is
/// tested in isolation.rs.
const NO_BREAKER: (&str, &str) = ("WEBHOOKS_BREAKER_FAILURES", "1000");
const WAIT: Duration = Duration::from_secs(30);
const BROKEN: &str = "<html><body><h1>Internal Server Error</h1></body></html>";

async fn post_event(server: &Server, org: &str, id: &str) -> String {
    let event = json!({"eventId": id, "type": "contact.created", "organizationId": org,
                       "departmentId": "d", "contact": {"id": "c-1"}});
    let (status, body) = send(server.req(Method::POST, "/events", org).json(&event)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["notifications"], 1, "{body}");
    id.to_owned()
}

fn millis_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test]
async fn failed_deliveries_are_shown_resent_and_recovered() {
    let server = Server::start_with(&[SHORT_SCHEDULE, NO_BREAKER]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let (status, sub) = server
        .create("org-1", &inbox.uri("/hook"), &[&contact("org-1", "d")])
        .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    let sub_id = sub["id"].as_str().unwrap().to_owned();
    let base = format!("/webhooksubscription/{sub_id}");
    let started = millis_now();

    // A receiver answering 500 with HTML: three attempts, then FAILED.
    inbox.break_with(500, BROKEN);
    let evt = post_event(&server, "org-1", "evt-1").await;
    let uuid = webhook_core::notification::notification_id(&evt, &sub_id).to_string();
    let one = format!("{base}/notifications/{uuid}");
    let failed = wait_until(&server, "org-1", &one, |n| n["status"] == "FAILED").await;
    let attempts = failed["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3, "{failed}");
    for (i, a) in attempts.iter().enumerate() {
        assert_eq!(a["attempt"], i + 1);
        assert_eq!(a["outcome"], "FAILED");
        assert_eq!(a["httpStatus"], 500);
        assert_eq!(a["code"], "BAD_STATUS");
        assert_eq!(a["responseBody"], BROKEN);
        assert_eq!(a["trigger"], "SCHEDULED");
        assert!(a["durationMs"].as_u64().is_some());
    }
    assert_eq!(failed["uuid"], uuid.as_str());
    assert_eq!(failed["eventId"], "evt-1");
    assert_eq!(failed["subscriptionId"], sub_id.as_str());
    assert_eq!(failed["lastHttpStatus"], 500);
    assert_eq!(failed["nextAttemptTime"], Value::Null);
    let sent: Value = serde_json::from_slice(&inbox.received()[0].body).unwrap();
    assert_eq!(failed["payload"], sent, "the payload as sent");

    let (status, list) = server
        .get(&format!("{base}/notifications?status=FAILED"), "org-1")
        .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["totalElements"], 1);
    let summary = &list["content"][0];
    assert_eq!(summary["attempts"], 3);
    assert_eq!(summary["lastCode"], "BAD_STATUS");
    assert!(summary["createdDateTime"].as_str().unwrap().ends_with('Z'));

    // Fixed: resend delivers it with the same webhook-id, as a MANUAL attempt.
    inbox.fix();
    let before = inbox.count();
    let (status, body) = send(server.req(Method::POST, &format!("{one}/resend"), "org-1")).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body, json!({"uuid": uuid, "status": "PENDING"}));
    let got = inbox.wait_for(before + 1, WAIT).await;
    assert_eq!(got[before].header("webhook-id"), uuid);
    let delivered = wait_until(&server, "org-1", &one, |n| n["status"] == "DELIVERED").await;
    let last = delivered["attempts"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (
            &last["attempt"],
            &last["outcome"],
            &last["httpStatus"],
            &last["trigger"],
            &last["code"]
        ),
        (
            &json!(4),
            &json!("SUCCEEDED"),
            &json!(200),
            &json!("MANUAL"),
            &Value::Null
        )
    );

    // Two more fail; recover sends exactly those, not the delivered one.
    inbox.break_with(500, BROKEN);
    // One after the other, so evt-3 is created in a later millisecond than evt-2
    // and "newest first" below has one right answer.
    let mut failing = Vec::new();
    for name in ["evt-2", "evt-3"] {
        let evt = post_event(&server, "org-1", name).await;
        let id = webhook_core::notification::notification_id(&evt, &sub_id);
        wait_until(
            &server,
            "org-1",
            &format!("{base}/notifications/{id}"),
            |n| n["status"] == "FAILED",
        )
        .await;
        failing.push(evt);
    }
    inbox.fix();
    let before = inbox.count();
    let recover = |since: i64| {
        server
            .req(Method::POST, &format!("{base}/recover"), "org-1")
            .json(&json!({"since": since}))
    };
    let (status, body) = send(recover(started)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body, json!({"notifications": 2, "more": false}));
    let (_, again) = send(recover(started)).await;
    assert_eq!(
        again["notifications"], 0,
        "they are PENDING now: not doubled"
    );
    let got = inbox.wait_for(before + 2, WAIT).await;
    let mut resent: Vec<String> = got[before..]
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    resent.sort();
    let mut expected: Vec<String> = failing
        .iter()
        .map(|e| webhook_core::notification::notification_id(e, &sub_id).to_string())
        .collect();
    expected.sort();
    assert_eq!(resent, expected, "exactly the FAILED ones");
    let all = wait_until(&server, "org-1", &format!("{base}/notifications"), |p| {
        p["content"]
            .as_array()
            .is_some_and(|c| c.len() == 3 && c.iter().all(|n| n["status"] == "DELIVERED"))
    })
    .await;
    assert_eq!(all["totalElements"], 3);
    assert_eq!(all["content"][0]["eventId"], "evt-3", "newest first");

    // Stats count them.
    let (status, stats) = server.get(&format!("{base}/stats"), "org-1").await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert_eq!(
        stats["totals"],
        json!({"delivered": 3, "failed": 0, "retried": 3, "pending": 0, "notifications": 3})
    );
    assert!(stats["buckets"].as_array().unwrap().len() >= 24);
    assert_eq!(stats["durationMs"]["count"], 3 * 3 + 3);
    assert!(stats["durationMs"]["p99"].as_u64().is_some());
    let delivered: u64 = stats["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["delivered"].as_u64().unwrap())
        .sum();
    assert_eq!(delivered, 3);

    // Another organization: 404 on every endpoint, whatever it knows.
    let paths = [
        (Method::GET, format!("{base}/notifications")),
        (Method::GET, one.clone()),
        (Method::POST, format!("{one}/resend")),
        (Method::POST, format!("{base}/recover")),
        (Method::GET, format!("{base}/stats")),
    ];
    for (method, path) in &paths {
        let mut req = server.req(method.clone(), path, "org-2");
        if path.ends_with("/recover") {
            req = req.json(&json!({"since": started}));
        }
        let (status, body) = send(req).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {body}");
        assert_eq!(body["code"], "SUBSCRIPTION_NOT_FOUND");
    }
    // A notification of this organization under another of its subscriptions: 404.
    let (_, other) = server
        .create("org-1", &inbox.uri("/other"), &[&contact("org-1", "x")])
        .await;
    let wrong = format!(
        "/webhooksubscription/{}/notifications/{uuid}",
        other["id"].as_str().unwrap()
    );
    let (status, body) = server.get(&wrong, "org-1").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("NOTIFICATION_NOT_FOUND"))
    );
}

#[tokio::test]
async fn history_requests_are_validated_and_scoped() {
    let server = Server::start_with(&[SHORT_SCHEDULE, NO_BREAKER]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let (_, sub) = server
        .create("org-1", &inbox.uri("/hook"), &[&contact("org-1", "d")])
        .await;
    let base = format!("/webhooksubscription/{}", sub["id"].as_str().unwrap());
    let bad = |path: String| {
        let server = &server;
        async move {
            let (status, body) = server.get(&path, "org-1").await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
            assert_eq!(body["code"], "VALIDATION_FAILED", "{path}: {body}");
        }
    };
    bad(format!("{base}/notifications?status=LOST")).await;
    bad(format!("{base}/notifications?since=yesterday")).await;
    bad(format!("{base}/notifications?sort=uri")).await;
    bad(format!("{base}/stats?since=10&until=5")).await;
    bad(format!("{base}/stats?since=0&until=4000000000")).await;
    let (status, empty) = server
        .get(
            &format!("{base}/notifications?status=pending,failed"),
            "org-1",
        )
        .await;
    assert_eq!(
        (status, &empty["totalElements"]),
        (StatusCode::OK, &json!(0))
    );

    let recover = |body: Value| {
        server
            .req(Method::POST, &format!("{base}/recover"), "org-1")
            .json(&body)
    };
    let now = millis_now();
    for body in [
        json!({}),
        json!({"since": now - 1000, "until": now - 2000}),
        json!({"since": now - 31 * 86_400_000}),
        json!({"since": "yesterday"}),
    ] {
        let (status, problem) = send(recover(body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {problem}");
        assert_eq!(problem["code"], "VALIDATION_FAILED", "{body}: {problem}");
    }
    let (status, body) = send(recover(json!({"since": now - 1000}))).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::ACCEPTED,
            json!({"notifications": 0, "more": false})
        )
    );

    let (status, body) = send(server.req(
        Method::POST,
        &format!("{base}/notifications/00000000-0000-5000-8000-000000000000/resend"),
        "org-1",
    ))
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("NOTIFICATION_NOT_FOUND"))
    );

    // Resend and recover need webhooks/write.
    let read_only = server.token_with("org-1", &["webhooks/read"]);
    let (status, body) = send(
        server
            .http
            .post(server.url(&format!("{base}/recover")))
            .header("x-api-key", &server.key)
            .bearer_auth(read_only)
            .json(&json!({"since": now - 1000})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");

    // A subscription that is not ACTIVE cannot be sent to.
    let (_, expiring) = send(
        server
            .req(Method::POST, "/webhooksubscription", "org-1")
            .json(
                &json!({"uri": inbox.uri("/expiring"), "eventFilters": [contact("org-1", "e")],
                          "expiresDateInMillies": millis_now() + 60_000}),
            ),
    )
    .await;
    server.advance_clock(Duration::from_secs(61));
    let expired = format!("/webhooksubscription/{}", expiring["id"].as_str().unwrap());
    let (status, body) = send(
        server
            .req(Method::POST, &format!("{expired}/recover"), "org-1")
            .json(&json!({"since": now - 1000})),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["code"], "SUBSCRIPTION_NOT_ACTIVE");
}
