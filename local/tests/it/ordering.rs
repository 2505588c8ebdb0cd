//! Ordered delivery (issue 36), end to end: a subscription created with `"ordered": true`
//! gets its notifications in the order their events were accepted, each after every earlier
//! one was delivered or finally failed, with failures injected at random (retries hold the
//! line; a notification that fails every attempt lets the next one go). 100 notifications on
//! every commit, 1,000 in the full tier, on both backends: the SQLite queue's line, and on
//! the AWS backend the FIFO delivery queue (`--create-tables` creates it), whose message
//! keeps its place through a retry by its visibility.

use crate::common;

use std::time::Duration;

use common::*;
use http::StatusCode;
use serde_json::{json, Value};
use webhook_core::notification::notification_id;

const ORG: &str = "org-ordered";

fn event(i: usize) -> Value {
    json!({"eventId": format!("ordered-{i}"), "type": "contact.created", "organizationId": ORG,
           "departmentId": "dep", "occurredAt": 1_700_000_000_001i64,
           "contact": {"id": format!("contact-{i}")}})
}

async fn create_ordered(server: &Server, uri: &str) -> (StatusCode, Value) {
    let body = json!({"uri": uri, "eventFilters": [contact(ORG, "dep")], "ordered": true});
    send(
        server
            .req(reqwest::Method::POST, "/webhooksubscription", ORG)
            .json(&body),
    )
    .await
}

/// How many attempts fail before notification `i` succeeds: mostly none, sometimes one or
/// two, and 3 (every attempt of the schedule: finally failed) for one in twenty. A fixed
/// pseudo-random sequence, so a failure names the same case every run.
fn failures(i: usize) -> usize {
    match (i * 7_919 + 13) % 100 {
        0..=74 => 0,
        75..=86 => 1,
        87..=94 => 2,
        _ => 3,
    }
}

#[tokio::test]
async fn notifications_arrive_in_acceptance_order_through_retries_and_dead_letters() {
    // Three attempts a notification; 400 is not outage-like, so the breaker stays closed.
    let server = Server::start_with(&[("WEBHOOKS_RETRY_SCHEDULE", "100ms,100ms")]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let (status, sub) = create_ordered(&server, &inbox.uri("/hook")).await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    assert_eq!(sub["ordered"], true);
    let id = sub["id"].as_str().unwrap().to_owned();
    let (_, got) = server.get(&format!("/webhooksubscription/{id}"), ORG).await;
    assert_eq!(got["ordered"], true);

    let n = testkit::size::scaled(100, 1_000);
    // One at a time, the script's answers are taken in acceptance order; if order were
    // broken, the arrivals below would say so whatever answer each got.
    let mut script = Vec::new();
    for i in 0..n {
        script.extend(std::iter::repeat_n((400, None), failures(i)));
        if failures(i) < 3 {
            script.push((200, None));
        }
    }
    inbox.script(&script);
    for i in 0..n {
        assert_eq!(produce(&server, ORG, &event(i)).await, StatusCode::ACCEPTED);
    }
    let attempts: usize = (0..n)
        .map(|i| failures(i) + usize::from(failures(i) < 3))
        .sum();
    let limit = Duration::from_secs(testkit::size::scaled(60, 300) as u64);
    let arrivals = inbox.wait_for(attempts, limit).await;

    // The arrivals, consecutive repeats of one notification (its retries) taken as one, are
    // the notifications in acceptance order: none lost, none out of order, and a notification
    // seen again only right after itself, under the same uuid.
    let expected: Vec<String> = (0..n)
        .map(|i| notification_id(&format!("ordered-{i}"), &id).to_string())
        .collect();
    let mut seen: Vec<String> = Vec::new();
    for arrival in &arrivals {
        let uuid = arrival.header("webhook-id").to_owned();
        if seen.last() != Some(&uuid) {
            seen.push(uuid);
        }
    }
    let first_wrong = seen.iter().zip(&expected).position(|(a, b)| a != b);
    assert!(
        seen == expected,
        "arrivals out of acceptance order: {} blocks for {n} notifications, first difference \
         at {first_wrong:?}",
        seen.len()
    );
    for (i, uuid) in expected.iter().enumerate() {
        let count = arrivals
            .iter()
            .filter(|a| a.header("webhook-id") == uuid)
            .count();
        assert_eq!(
            count,
            failures(i) + usize::from(failures(i) < 3),
            "notification {i}"
        );
    }
    // Nothing more comes (every notification delivered or dead).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(inbox.count(), attempts);
}
