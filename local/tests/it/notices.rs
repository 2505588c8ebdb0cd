//! Operational notifications end to end, on both backends (SQLite, or
//! `--backend aws` on DynamoDB Local and moto with WEBHOOKS_TEST_BACKEND=aws):
//! a receiver subscribed to `/orgId/org-1/subscription` is told, signed with
//! its own secret, when another subscription of its organization starts
//! failing, recovers, is disabled, runs a notification out of retries or
//! expires soon; another organization is told nothing, and nothing is said
//! about an operational subscription itself.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use http::StatusCode;
use reqwest::Method;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

fn contact_event(id: &str, org: &str) -> Value {
    json!({"eventId": id, "type": "contact.created", "organizationId": org, "departmentId": "dep",
           "occurredAt": 1_700_000_000_001i64, "contact": {"id": "contact-7"}})
}

async fn subscribe(server: &Server, org: &str, uri: &str, filter: &str) -> (String, String) {
    let (status, sub) = server.create(org, uri, &[filter]).await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    assert_eq!(sub["eventFilters"], json!([filter]), "{sub}");
    let id = sub["id"].as_str().unwrap().to_owned();
    let (_, secret) = server
        .get(&format!("/webhooksubscription/{id}/secret"), org)
        .await;
    (id, secret["key"].as_str().unwrap().to_owned())
}

/// The operational notifications `receiver` got, checked: signed with
/// `secret`, for the filter and subscription that asked for them.
fn notices(receiver: &Receiver, secret: &str, filter: &str, id: &str) -> Vec<Value> {
    let webhook = standardwebhooks::Webhook::new(secret).unwrap();
    receiver
        .received()
        .iter()
        .map(|n| {
            webhook
                .verify(&n.body, &n.headers)
                .expect("signed with the receiver's own secret");
            let body = n.json();
            assert_eq!(body["event"], filter, "{body}");
            assert_eq!(body["subscriptionId"], id, "{body}");
            body
        })
        .collect()
}

/// Waits until a notice of `kind` about `about` has arrived; returns it.
async fn told(
    receiver: &Receiver,
    secret: &str,
    filter: &str,
    id: &str,
    kind: &str,
    about: &str,
) -> Value {
    let start = Instant::now();
    loop {
        let found = notices(receiver, secret, filter, id).into_iter().find(|n| {
            n["subscriptionInfo"]["type"] == kind
                && n["subscriptionInfo"]["subscriptionId"] == about
        });
        if let Some(n) = found {
            return n;
        }
        assert!(
            start.elapsed() < WAIT,
            "no {kind} about {about} within {WAIT:?}; got {:?}",
            notices(receiver, secret, filter, id)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_organization_is_told_when_its_subscriptions_fail_recover_and_expire() {
    let server = Server::start_with(&[
        ("WEBHOOKS_RETRY_SCHEDULE", "1s,1s,1s,1s,1s"),
        ("WEBHOOKS_FAILING_AFTER", "4"),
        // The breaker stays out of it: failing is told at the fourth failure.
        ("WEBHOOKS_BREAKER_FAILURES", "100"),
        ("WEBHOOKS_EXPIRY_CHECK_INTERVAL", "1s"),
    ]);
    let ops_filter = "/orgId/org-1/subscription";
    let ops = Receiver::start(Handshake::Echo).await;
    let (ops_id, ops_secret) = subscribe(&server, "org-1", &ops.uri("/ops"), ops_filter).await;
    // Another organization's operational subscription: told nothing about org-1.
    let other = Receiver::start(Handshake::Echo).await;
    subscribe(
        &server,
        "org-2",
        &other.uri("/ops"),
        "/orgId/org-2/subscription",
    )
    .await;
    // An operational subscription whose callback fails: told about nothing.
    let broken = Receiver::start(Handshake::Echo).await;
    let (broken_id, _) = subscribe(
        &server,
        "org-1",
        &broken.uri("/broken"),
        "/orgId/org-1/subscription?type=failing,recovered",
    )
    .await;
    broken.break_with(500, "down");

    // failing at the fourth failed attempt, exhausted when retries run out.
    let callback = Receiver::start(Handshake::Echo).await;
    let (callback_id, _) = subscribe(
        &server,
        "org-1",
        &callback.uri("/hook"),
        &contact("org-1", "dep"),
    )
    .await;
    callback.break_with(500, "busy");
    let event = contact_event("evt-failing", "org-1");
    assert_eq!(
        produce(&server, "org-1", &event).await,
        StatusCode::ACCEPTED
    );
    let failing = told(
        &ops,
        &ops_secret,
        ops_filter,
        &ops_id,
        "subscription.failing",
        &callback_id,
    )
    .await;
    let info = &failing["subscriptionInfo"];
    assert_eq!(info["organizationId"], "org-1");
    assert_eq!(info["uri"], callback.uri("/hook"));
    assert_eq!(info["status"], "ACTIVE");
    assert_eq!(info["consecutiveFailures"], 4);
    assert_eq!(info["lastAttempt"]["httpStatus"], 500);
    assert!(info["expirationTime"].is_string() && info["lastAttempt"]["durationMs"].is_u64());
    assert!(callback.count() >= 4);
    let exhausted = told(
        &ops,
        &ops_secret,
        ops_filter,
        &ops_id,
        "notification.exhausted",
        &callback_id,
    )
    .await;
    let first = &callback.received()[0].json();
    assert_eq!(
        exhausted["subscriptionInfo"]["notificationId"],
        first["uuid"]
    );
    assert_eq!(callback.count(), 6, "the first attempt and five retries");

    // recovered at the first delivery after failing.
    callback.fix();
    let event = contact_event("evt-recovered", "org-1");
    assert_eq!(
        produce(&server, "org-1", &event).await,
        StatusCode::ACCEPTED
    );
    let recovered = told(
        &ops,
        &ops_secret,
        ops_filter,
        &ops_id,
        "subscription.recovered",
        &callback_id,
    )
    .await;
    assert_eq!(
        recovered["subscriptionInfo"]["lastAttempt"]["httpStatus"],
        200
    );

    // disabled by a 410.
    callback.break_with(410, "gone");
    let event = contact_event("evt-gone", "org-1");
    assert_eq!(
        produce(&server, "org-1", &event).await,
        StatusCode::ACCEPTED
    );
    let disabled = told(
        &ops,
        &ops_secret,
        ops_filter,
        &ops_id,
        "subscription.disabled",
        &callback_id,
    )
    .await;
    assert_eq!(disabled["subscriptionInfo"]["status"], "BLACKLISTED");

    // expiring: a subscription expiring within the notice (7 days by default).
    let soon = Receiver::start(Handshake::Echo).await;
    let in_a_day = chrono::Utc::now().timestamp_millis() + 86_400_000;
    let (status, expiring) = send(
        server
            .req(Method::POST, "/webhooksubscription", "org-1")
            .json(
                &json!({"uri": soon.uri("/soon"), "eventFilters": [contact("org-1", "dep")],
                          "expiresDateInMillies": in_a_day}),
            ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{expiring}");
    let soon_id = expiring["id"].as_str().unwrap();
    let reminder = told(
        &ops,
        &ops_secret,
        ops_filter,
        &ops_id,
        "subscription.expiring",
        soon_id,
    )
    .await;
    assert_eq!(
        reminder["subscriptionInfo"]["expirationTime"],
        expiring["expirationTime"]
    );

    // Each told once, nothing about the operational subscriptions, nothing
    // to another organization; the broken one did fail meanwhile.
    server.wait_until_idle().await;
    let all = notices(&ops, &ops_secret, ops_filter, &ops_id);
    let kinds: Vec<(&str, &str)> = all
        .iter()
        .map(|n| {
            let info = &n["subscriptionInfo"];
            (
                info["type"].as_str().unwrap(),
                info["subscriptionId"].as_str().unwrap(),
            )
        })
        .collect();
    for (kind, about) in [
        ("subscription.failing", callback_id.as_str()),
        ("notification.exhausted", callback_id.as_str()),
        ("subscription.recovered", callback_id.as_str()),
        ("subscription.disabled", callback_id.as_str()),
        ("subscription.expiring", soon_id),
    ] {
        let n = kinds.iter().filter(|k| **k == (kind, about)).count();
        assert_eq!(n, 1, "{kind} about {about}: {kinds:?}");
    }
    assert!(
        kinds
            .iter()
            .all(|(_, about)| *about != broken_id && *about != ops_id),
        "{kinds:?}"
    );
    assert!(
        broken.count() >= 1,
        "the broken operational callback was called"
    );
    assert_eq!(other.count(), 0, "org-2 is told nothing about org-1");

    // The filter is refused for another organization like the others, and
    // unknown types are a validation error naming the field.
    let mixed = [
        contact("org-1", "dep"),
        "/orgId/org-2/subscription".to_owned(),
    ];
    let mixed: Vec<&str> = mixed.iter().map(String::as_str).collect();
    let (status, foreign) = server.create("org-1", &ops.uri("/foreign"), &mixed).await;
    assert_eq!(status, StatusCode::OK, "{foreign}");
    assert_eq!(foreign["eventFilters"], json!([mixed[0]]));
    let refused = &foreign["disabledFilters"][0];
    assert_eq!(refused["filter"], "/orgId/org-2/subscription");
    assert_eq!(refused["reason"], "PERMISSION_DENIED");
    let (status, body) = server
        .create(
            "org-1",
            &ops.uri("/bad"),
            &["/orgId/org-1/subscription?type=failing,late"],
        )
        .await;
    assert_invalid(status, &body, "eventFilters[0]", "an unknown type");
}
