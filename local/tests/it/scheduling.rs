//! Per-subscription scheduling (issue 36), end to end on both backends (SQLite, or
//! `--backend aws` on DynamoDB Local and moto with WEBHOOKS_TEST_BACKEND=aws):
//!
//! - a receiver's "slow down" (`429` with `Retry-After`) holds the whole subscription:
//!   its other jobs wait for the pause too;
//! - a healthy but slow callback (1 s a call) with a deep backlog (500 on every commit,
//!   25,000 in the full tier) does not hold back another organization: every one of the
//!   other's notifications arrives while the backlog is still deep (a condition on the
//!   backlog, not a latency).

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use http::StatusCode;
use webhook_core::notification::notification_id;

/// A `429` with `Retry-After: 2` pauses the subscription: its other due jobs, queued
/// after the answer, reach the receiver no sooner than 2 s after it (less the time
/// the answer took to arrive); the job that got it retries on the schedule.
#[tokio::test]
async fn a_429_with_retry_after_pauses_the_whole_subscription() {
    let server = Server::start_with(&[("WEBHOOKS_RETRY_SCHEDULE", "5s,5s")]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let id = subscribe(&server, "org-p", &inbox).await;
    inbox.script(&[(429, Some("2"))]);
    assert_eq!(
        produce(&server, "org-p", &contact_event("first", "org-p")).await,
        StatusCode::ACCEPTED
    );
    let answered = inbox.wait_for(1, Duration::from_secs(30)).await[0].at;
    // The pause is written (step 5) before the attempt is in the history (step 7).
    let first = notification_id("first", &id);
    let path = format!("/webhooksubscription/{id}/notifications/{first}");
    for _ in 0..500 {
        let (_, n) = server.get(&path, "org-p").await;
        if n["attempts"].as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for i in 0..3 {
        let event = contact_event(&format!("after-{i}"), "org-p");
        assert_eq!(
            produce(&server, "org-p", &event).await,
            StatusCode::ACCEPTED
        );
    }
    // The three, and the first one's retry.
    let got = inbox.wait_for_unique(4, Duration::from_secs(60)).await;
    let others: Vec<Duration> = got
        .iter()
        .filter(|r| r.header("webhook-id") != first.to_string())
        .map(|r| r.at.duration_since(answered))
        .collect();
    assert_eq!(others.len(), 3, "{others:?}");
    for after in others {
        assert!(
            after >= Duration::from_millis(1_800),
            "a job of the paused subscription went {after:?} after the 429"
        );
    }
}

/// The pause is visible: while it holds, the subscription's `health.pausedUntil` (got
/// and listed) is when it ends, the breaker's `state` still `closed`; once it has
/// passed, the field is gone and the notification it held is delivered.
#[tokio::test]
async fn a_pause_is_in_the_subscriptions_health_until_it_ends() {
    let server = Server::start_with(&[("WEBHOOKS_RETRY_SCHEDULE", "5s,10s")]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let id = subscribe(&server, "org-v", &inbox).await;
    inbox.script(&[(429, Some("4"))]);
    let asked = chrono::Utc::now().timestamp_millis();
    let event = contact_event("held", "org-v");
    assert_eq!(
        produce(&server, "org-v", &event).await,
        StatusCode::ACCEPTED
    );
    let path = format!("/webhooksubscription/{id}");
    let sub = wait_until(&server, "org-v", &path, |s| {
        s["health"]["pausedUntil"].is_string()
    })
    .await;
    assert_eq!(sub["health"]["state"], "closed", "{sub}");
    let until = epoch_ms(&sub["health"]["pausedUntil"]);
    let answered = chrono::Utc::now().timestamp_millis();
    assert!(
        (asked + 4_000..=answered + 4_000).contains(&until),
        "pausedUntil is the Retry-After's time: {sub}"
    );
    let (status, list) = server.get("/webhooksubscription/all", "org-v").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(
        list["content"][0]["health"], sub["health"],
        "the list shows the same health"
    );
    let sub = wait_until(&server, "org-v", &path, |s| {
        s["health"].get("pausedUntil").is_none()
    })
    .await;
    assert_eq!(sub["health"]["state"], "closed", "{sub}");
    let held = format!("{path}/notifications/{}", notification_id("held", &id));
    wait_until(&server, "org-v", &held, |n| n["status"] == "DELIVERED").await;
}

/// Posting the subscription again keeps the pause (it closes the breaker, not the
/// receiver's request; docs/api.md, "Notifications"): the answer and every read after it
/// show the same `pausedUntil`, and a notification queued after the re-post is first
/// attempted once it has passed.
#[tokio::test]
async fn posting_the_subscription_again_keeps_the_pause() {
    let server = Server::start_with(&[("WEBHOOKS_RETRY_SCHEDULE", "5s,10s")]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let id = subscribe(&server, "org-r", &inbox).await;
    inbox.script(&[(429, Some("4"))]);
    let event = contact_event("held", "org-r");
    assert_eq!(
        produce(&server, "org-r", &event).await,
        StatusCode::ACCEPTED
    );
    let path = format!("/webhooksubscription/{id}");
    let paused = wait_until(&server, "org-r", &path, |s| {
        s["health"]["pausedUntil"].is_string()
    })
    .await;
    let until = &paused["health"]["pausedUntil"];
    let (status, again) = server
        .create("org-r", &inbox.uri("/hook"), &[&contact("org-r", "dep")])
        .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["id"], id.as_str(), "the same subscription");
    assert_eq!(&again["health"]["pausedUntil"], until, "{again}");
    let event = contact_event("after", "org-r");
    assert_eq!(
        produce(&server, "org-r", &event).await,
        StatusCode::ACCEPTED
    );
    let (_, got) = server.get(&path, "org-r").await;
    assert_eq!(&got["health"]["pausedUntil"], until, "{got}");
    let after = format!("{path}/notifications/{}", notification_id("after", &id));
    let delivered = wait_until(&server, "org-r", &after, |n| n["status"] == "DELIVERED").await;
    assert!(
        epoch_ms(&delivered["lastAttemptTime"]) >= epoch_ms(until),
        "attempted before the pause's end ({until}): {delivered}"
    );
}

/// An ISO 8601 time of the API as epoch ms.
fn epoch_ms(v: &serde_json::Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(v.as_str().expect("a time"))
        .expect("ISO 8601")
        .timestamp_millis()
}

/// Queued for the slow callback: 500 on every commit, 25,000 in the full tier (beyond the
/// 20,000 due rows the old SQLite lease looked at), on both backends. On the AWS backend
/// posting 25,000 events one at a time through the emulators takes 7 to 14 minutes by the
/// machine (`.config/nextest.toml` gives the test twenty-five).
fn backlog_size() -> usize {
    testkit::size::scaled(500, 25_000)
}
const OTHER_EVENTS: usize = 20;

/// Organization A's callback is healthy but slow (1 s a call) and has a deep backlog;
/// organization B's gets one event every 100 ms. Every one of B's notifications arrives
/// while at least half of A's backlog is still undelivered. A's cap of calls in flight
/// is 8 here, so that its backlog stays deep for a minute whatever the machine's speed
/// (at the default 32 the backlog of the small size would drain in 16 s).
#[tokio::test]
async fn a_deep_backlog_of_a_slow_callback_does_not_hold_back_another_organization() {
    let server = Arc::new(Server::start_with(&[(
        "WEBHOOKS_MAX_IN_FLIGHT_PER_SUBSCRIPTION",
        "8",
    )]));
    let slow = Receiver::start(Handshake::Echo).await;
    let healthy = Receiver::start(Handshake::Echo).await;
    subscribe(&server, "org-slow", &slow).await;
    let healthy_id = subscribe(&server, "org-healthy", &healthy).await;
    slow.slow(Duration::from_secs(1));
    let backlog = backlog_size();
    let posting = std::time::Instant::now();
    flood(&server, "org-slow", "backlog", backlog).await;
    eprintln!("{backlog} events posted in {:?}", posting.elapsed());

    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut expected = HashSet::new();
    for i in 0..OTHER_EVENTS {
        tick.tick().await;
        let id = format!("healthy-{i}");
        expected.insert(notification_id(&id, &healthy_id).to_string());
        let event = contact_event(&id, "org-healthy");
        assert_eq!(
            produce(&server, "org-healthy", &event).await,
            StatusCode::ACCEPTED
        );
    }
    let got = healthy
        .wait_for_unique(OTHER_EVENTS, Duration::from_secs(120))
        .await;
    let arrived: HashSet<String> = got
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert_eq!(arrived, expected, "every notification of B arrives");
    let last = got.iter().map(|r| r.at).max().unwrap();
    let delivered_before = slow.received().iter().filter(|r| r.at <= last).count();
    eprintln!("B's last notification arrived with {delivered_before} of A's {backlog} delivered");
    assert!(
        backlog - delivered_before >= backlog / 2,
        "A's backlog was drained ({delivered_before} of {backlog} delivered) before B's notifications arrived"
    );
}
