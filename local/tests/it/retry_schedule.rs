//! A subscription's own retry schedule (`retrySchedule`, issue 46), end to end on both
//! backends (SQLite, or `--backend aws` on DynamoDB Local and moto with
//! WEBHOOKS_TEST_BACKEND=aws). The deployment's schedule is an hour (`WEBHOOKS_RETRY_SCHEDULE`),
//! so a retry the subscription's schedule did not time would not come within the tests' bounds.
//!
//! - the field: validated within its documented limits (each accepted at the limit, refused
//!   one past it with `400 VALIDATION_FAILED` naming `retrySchedule` or the wait at fault),
//!   shown by create, get and list, kept by an update that does not name it, replaced by one
//!   that does, removed by `null`, kept across a restart;
//! - delivery: a failing notification is retried after each of its waits (the history's
//!   `nextAttemptTime` against the previous attempt's time, within the ±20 % jitter), then
//!   given up after the last (`FAILED`, dead-lettered), the subscription still `ACTIVE`;
//! - ordering: an ordered subscription's next notification waits for its head's own schedule
//!   to end;
//! - the blacklist clock: the failure streak still blacklists by its age
//!   (`WEBHOOKS_BLACKLIST_AFTER`), not by the schedule;
//! - a receiver's pause: at most the subscription's longest wait.

use crate::common;

use std::time::Duration;

use common::*;
use http::StatusCode;
use serde_json::{json, Value};
use webhook_core::notification::notification_id;
use webhook_core::retry_schedule::MAX_WAITS;

/// The deployment's schedule: one wait of an hour.
const DEPLOYMENT: (&str, &str) = ("WEBHOOKS_RETRY_SCHEDULE", "1h");
/// Failures here are 500s: the breaker, tested elsewhere, must not hold them.
const NO_BREAKER: (&str, &str) = ("WEBHOOKS_BREAKER_FAILURES", "1000");

/// Creates (or updates) `org`'s subscription of `uri`, with `extra` members.
async fn post(server: &Server, org: &str, uri: &str, extra: Value) -> (StatusCode, Value) {
    post_subscription(server, org, uri, contact(org, "dep"), extra).await
}

/// What get and list show of subscription `id`'s `retrySchedule`.
async fn shown(server: &Server, org: &str, id: &str) -> Value {
    shown_field(server, org, id, "retrySchedule").await
}

fn epoch_ms(v: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(v.as_str().expect("a time"))
        .expect("ISO 8601")
        .timestamp_millis()
}

#[tokio::test]
async fn the_retry_schedule_is_validated_shown_replaced_removed_and_kept() {
    let server = Server::start();
    let inbox = Receiver::start(Handshake::Echo).await;
    let uri = inbox.uri("/hook");
    let org = "org-rs-field";

    let waits = |n: usize| json!(vec!["1s"; n]);
    // (at the limit, one past it, the field named, what the message says)
    for (at_limit, past, field, says) in [
        (
            waits(MAX_WAITS),
            waits(MAX_WAITS + 1),
            "retrySchedule",
            "at most 20",
        ),
        (
            json!(["12h"]),
            json!(["43201s"]),
            "retrySchedule[0]",
            "outside",
        ),
        (
            json!([5, "1s"]),
            json!([5, 0]),
            "retrySchedule[1]",
            "outside",
        ),
        (
            json!(["12h", "12h", "12h", "12h"]),
            json!(["12h", "12h", "12h", "12h", "1s"]),
            "retrySchedule",
            "add up",
        ),
    ] {
        let (status, body) = post(&server, org, &uri, json!({"retrySchedule": past})).await;
        assert_invalid(status, &body, field, says);
        let message = body["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
        let (status, body) = post(&server, org, &uri, json!({"retrySchedule": at_limit})).await;
        assert_eq!(status, StatusCode::OK, "{says} at the limit: {body}");
    }
    for (bad, field) in [
        (json!([]), "retrySchedule"),
        (json!("5s,2m"), "retrySchedule"),
        (json!(["1500ms"]), "retrySchedule[0]"),
        (json!(["soon"]), "retrySchedule[0]"),
        (json!([1.5]), "retrySchedule[0]"),
        (json!([-1]), "retrySchedule[0]"),
    ] {
        let (status, body) = post(&server, org, &uri, json!({"retrySchedule": bad})).await;
        assert_invalid(status, &body, field, &format!("{bad}"));
    }

    let other = Receiver::start(Handshake::Echo).await;
    let (status, plain) = post(&server, org, &other.uri("/hook"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{plain}");
    assert!(
        plain.get("retrySchedule").is_none(),
        "the original interface: {plain}"
    );

    let (_, set) = post(
        &server,
        org,
        &uri,
        json!({"retrySchedule": [5, "120s", "1h"]}),
    )
    .await;
    let id = set["id"].as_str().unwrap().to_owned();
    let first = json!(["5s", "2m", "1h"]);
    assert_eq!(set["retrySchedule"], first, "in its shortest form: {set}");
    assert_eq!(shown(&server, org, &id).await, first);
    let (_, renewed) = post(&server, org, &uri, json!({"expiresDateInMillies": 0})).await;
    assert_eq!(
        renewed["retrySchedule"], first,
        "absent keeps it: {renewed}"
    );
    let second = json!(["30s", "90s"]);
    let (_, replaced) = post(&server, org, &uri, json!({"retrySchedule": second})).await;
    assert_eq!(replaced["retrySchedule"], second);
    let server = server.restart();
    assert_eq!(
        shown(&server, org, &id).await,
        second,
        "kept across a restart"
    );
    let (_, removed) = post(&server, org, &uri, json!({"retrySchedule": null})).await;
    assert!(
        removed.get("retrySchedule").is_none(),
        "null removes it: {removed}"
    );
    assert_eq!(shown(&server, org, &id).await, Value::Null);
}

/// The notification's history once it has `n` attempts (and, while `PENDING`, the time of
/// the next).
async fn after_attempts(server: &Server, org: &str, path: &str, n: usize) -> Value {
    wait_until(server, org, path, |h| {
        h["attempts"].as_array().is_some_and(|a| a.len() >= n)
    })
    .await
}

/// A failing notification is retried after each of the subscription's waits (2 s, 3 s), not
/// the deployment's hour, and given up after the last: three attempts, then `FAILED`.
#[tokio::test]
async fn a_failing_notification_follows_its_subscriptions_schedule_then_is_dead_lettered() {
    let server = Server::start_with(&[DEPLOYMENT, NO_BREAKER]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let org = "org-rs-walk";
    let (status, sub) = post(
        &server,
        org,
        &inbox.uri("/hook"),
        json!({"retrySchedule": ["2s", "3s"]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    let id = sub["id"].as_str().unwrap().to_owned();
    inbox.break_with(500, "down");
    assert_eq!(
        produce(&server, org, &contact_event("walk", org)).await,
        StatusCode::ACCEPTED
    );
    let path = format!(
        "/webhooksubscription/{id}/notifications/{}",
        notification_id("walk", &id)
    );
    // On AWS a retry's time is kept to the second (docs/api.md, "Where the runtimes differ").
    let slack = if aws_backend() { 1_000 } else { 0 };
    for (n, wait_ms) in [(1, 2_000), (2, 3_000)] {
        let h = after_attempts(&server, org, &path, n).await;
        assert_eq!(h["status"], "PENDING", "after attempt {n}: {h}");
        let at = epoch_ms(&h["attempts"][n - 1]["timestamp"]);
        let next = epoch_ms(&h["nextAttemptTime"]) - at;
        assert!(
            (wait_ms * 8 / 10 - slack..=wait_ms * 12 / 10 + slack).contains(&next),
            "attempt {n}'s retry is due {next} ms after it, not {wait_ms} ms ±20 %: {h}"
        );
        let h = after_attempts(&server, org, &path, n + 1).await;
        let then = epoch_ms(&h["attempts"][n]["timestamp"]);
        assert!(
            then - at >= wait_ms * 8 / 10 - slack,
            "attempt {} came {} ms after attempt {n}: {h}",
            n + 1,
            then - at
        );
    }
    let failed = wait_until(&server, org, &path, |h| h["status"] == "FAILED").await;
    assert_eq!(failed["attempts"].as_array().unwrap().len(), 3, "{failed}");
    assert_eq!(failed["nextAttemptTime"], Value::Null);
    let (_, sub) = server.get(&format!("/webhooksubscription/{id}"), org).await;
    assert_eq!(
        sub["status"], "ACTIVE",
        "an ended schedule does not blacklist: {sub}"
    );
}

/// An ordered subscription's head fails every attempt of its own schedule (1 s): the next
/// notification waits for it to be given up, then goes; nothing arrives out of order.
#[tokio::test]
async fn ordering_holds_through_the_subscriptions_schedule() {
    let server = Server::start_with(&[DEPLOYMENT, NO_BREAKER]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let org = "org-rs-line";
    let (status, sub) = post(
        &server,
        org,
        &inbox.uri("/hook"),
        json!({"ordered": true, "retrySchedule": ["1s"]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    let id = sub["id"].as_str().unwrap().to_owned();
    inbox.script(&[(400, None), (400, None), (200, None), (200, None)]);
    for event in ["head", "next", "last"] {
        assert_eq!(
            produce(&server, org, &contact_event(event, org)).await,
            StatusCode::ACCEPTED
        );
    }
    let arrivals = inbox.wait_for(4, Duration::from_secs(60)).await;
    let order: Vec<String> = arrivals
        .iter()
        .map(|a| a.header("webhook-id").to_owned())
        .collect();
    let uuid = |e: &str| notification_id(e, &id).to_string();
    assert_eq!(
        order,
        [uuid("head"), uuid("head"), uuid("next"), uuid("last")],
        "the head twice (its schedule), then the rest in order"
    );
    let head = format!("/webhooksubscription/{id}/notifications/{}", uuid("head"));
    wait_until(&server, org, &head, |h| h["status"] == "FAILED").await;
}

/// The failure streak blacklists by its age, whatever the schedule: with
/// `WEBHOOKS_BLACKLIST_AFTER` 2 s and a schedule of ten 1 s waits, the subscription is
/// `BLACKLISTED` by a failure at least 2 s after the first, long before its schedule ends.
#[tokio::test]
async fn the_blacklist_clock_keeps_its_meaning_with_a_schedule() {
    let server = Server::start_with(&[DEPLOYMENT, NO_BREAKER, ("WEBHOOKS_BLACKLIST_AFTER", "2s")]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let org = "org-rs-clock";
    let (status, sub) = post(
        &server,
        org,
        &inbox.uri("/hook"),
        json!({"retrySchedule": vec!["1s"; 10]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    let id = sub["id"].as_str().unwrap().to_owned();
    inbox.break_with(500, "down");
    assert_eq!(
        produce(&server, org, &contact_event("clock", org)).await,
        StatusCode::ACCEPTED
    );
    let path = format!(
        "/webhooksubscription/{id}/notifications/{}",
        notification_id("clock", &id)
    );
    let failed = wait_until(&server, org, &path, |h| h["status"] == "FAILED").await;
    let attempts = failed["attempts"].as_array().unwrap();
    assert!(
        attempts.len() < 11,
        "blacklisted before the schedule ended: {failed}"
    );
    let first = epoch_ms(&attempts[0]["timestamp"]);
    let last = epoch_ms(&attempts[attempts.len() - 1]["timestamp"]);
    assert!(
        last - first >= 2_000,
        "blacklisted by a failure {} ms after the first, before the clock's 2 s: {failed}",
        last - first
    );
    let (_, sub) = server.get(&format!("/webhooksubscription/{id}"), org).await;
    assert_eq!(sub["status"], "BLACKLISTED", "{sub}");
}

/// A receiver's pause is bounded by the subscription's longest wait, not the deployment's:
/// a `429` asking for an hour pauses a subscription whose schedule is `["2s"]` for 2 s.
#[tokio::test]
async fn a_pause_lasts_at_most_the_subscriptions_longest_wait() {
    let server = Server::start_with(&[DEPLOYMENT, NO_BREAKER]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let org = "org-rs-pause";
    let (status, sub) = post(
        &server,
        org,
        &inbox.uri("/hook"),
        json!({"retrySchedule": ["2s"]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    let id = sub["id"].as_str().unwrap().to_owned();
    inbox.script(&[(429, Some("3600"))]);
    let asked = chrono::Utc::now().timestamp_millis();
    assert_eq!(
        produce(&server, org, &contact_event("paused", org)).await,
        StatusCode::ACCEPTED
    );
    let path = format!("/webhooksubscription/{id}");
    let paused = wait_until(&server, org, &path, |s| {
        s["health"]["pausedUntil"].is_string()
    })
    .await;
    let answered = chrono::Utc::now().timestamp_millis();
    let until = epoch_ms(&paused["health"]["pausedUntil"]);
    assert!(
        (asked + 2_000..=answered + 2_000).contains(&until),
        "paused for the subscription's longest wait (2 s), not the hour asked: {paused}"
    );
    // Its retry comes after that wait (the deployment's hour would not come in time).
    let notification = format!("{path}/notifications/{}", notification_id("paused", &id));
    wait_until(&server, org, &notification, |n| n["status"] == "DELIVERED").await;
}
