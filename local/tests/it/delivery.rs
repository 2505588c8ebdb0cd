//! Events to signed notifications, end to end: the real binary, real
//! receivers, signatures checked with the `standardwebhooks` crate.

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use http::StatusCode;
use reqwest::Method;
use serde_json::{json, Value};

const FAST_RETRIES: (&str, &str) = ("WEBHOOKS_RETRY_SCHEDULE", "100ms,100ms,100ms,100ms,100ms");
const WAIT: Duration = Duration::from_secs(20);
/// For the kill test on moto (1,000 notifications in the full tier), which slows as its
/// queue grows. A bound on a condition, not a sleep.
const SLOW_WAIT: Duration = Duration::from_secs(240);

async fn post_event(server: &Server, org: &str, event: Value) -> (StatusCode, Value) {
    send(server.req(Method::POST, "/events", org).json(&event)).await
}

fn inbound_event(id: &str, org: &str, dep: &str, message_id: &str) -> Value {
    json!({
        "eventId": id, "type": "message.inbound", "organizationId": org, "departmentId": dep,
        "occurredAt": 1_700_000_000_000i64,
        "message": {"id": message_id, "owner": null, "time": "2024-03-10T18:07:52.534Z", "direction": "in",
                    "to": ["+15550100"], "from": "+15550199", "text": "hello", "media": [], "attachments": []},
        "carrierMessageId": "carrier-1", "status": "RECEIVED"
    })
}

fn contact_event(id: &str, kind: &str, org: &str, dep: &str) -> Value {
    json!({"eventId": id, "type": kind, "organizationId": org, "departmentId": dep,
           "occurredAt": 1_700_000_000_001i64, "contact": {"id": "contact-7"}})
}

async fn subscribe(server: &Server, org: &str, uri: &str, filters: &[&str]) -> (String, String) {
    let (status, sub) = server.create(org, uri, filters).await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    let id = sub["id"].as_str().unwrap().to_owned();
    let (_, secret) = server
        .get(&format!("/webhooksubscription/{id}/secret"), org)
        .await;
    (id, secret["key"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn inbound_message_arrives_signed_and_can_be_fetched() {
    let server = Server::start_with(&[FAST_RETRIES]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let filter = inbound("org-1", "dep-1");
    let (sub_id, secret) = subscribe(&server, "org-1", &inbox.uri("/hook"), &[&filter]).await;

    let (status, body) = post_event(
        &server,
        "org-1",
        inbound_event("evt-1", "org-1", "dep-1", "msg-1"),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body, json!({"eventId": "evt-1", "notifications": 1}));

    let got = inbox.wait_for(1, WAIT).await;
    let n = &got[0];
    let payload = n.json();
    let uuid = webhook_core::notification::notification_id("evt-1", &sub_id).to_string();
    let timestamp = payload["timestamp"].as_i64().unwrap();
    assert_eq!(
        payload,
        json!({"uuid": uuid, "timestamp": timestamp, "event": filter, "subscriptionId": sub_id,
               "messageInfo": {"organizationId": "org-1", "departmentId": "dep-1", "lastUpdated": 1_700_000_000_000i64,
                               "messageId": "msg-1", "carrierMessageId": "carrier-1", "status": "RECEIVED"}})
    );
    assert_eq!(n.header("content-type"), "application/json");
    assert_eq!(n.header("webhook-id"), uuid);
    // Verified by code independent of the sender's.
    standardwebhooks::Webhook::new(&secret)
        .unwrap()
        .verify(&n.body, &n.headers)
        .expect("valid signature");
    let tampered = [&n.body[..], b" "].concat();
    assert!(standardwebhooks::Webhook::new(&secret)
        .unwrap()
        .verify(&tampered, &n.headers)
        .is_err());

    let (status, message) = server.get("/message/getmessagebyid/msg-1", "org-1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(message["text"], "hello");
    assert_eq!(message["to"], json!(["+15550100"]));
    let (status, _) = server.get("/message/getmessagebyid/msg-1", "org-2").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn events_reach_only_matching_filters_of_their_organization_and_department() {
    let server = Server::start_with(&[FAST_RETRIES]);
    let (outbound_rx, contact_rx, other_dep_rx, other_org_rx, inbound_rx) = (
        Receiver::start(Handshake::Echo).await,
        Receiver::start(Handshake::Echo).await,
        Receiver::start(Handshake::Echo).await,
        Receiver::start(Handshake::Echo).await,
        Receiver::start(Handshake::Echo).await,
    );
    let outbound = "/orgId/org-1/department/dep-1/message?direction=outbound".to_owned();
    subscribe(&server, "org-1", &outbound_rx.uri("/o"), &[&outbound]).await;
    let (contact_sub, _) = subscribe(
        &server,
        "org-1",
        &contact_rx.uri("/c"),
        &[&contact("org-1", "dep-1")],
    )
    .await;
    subscribe(
        &server,
        "org-1",
        &other_dep_rx.uri("/d"),
        &[&contact("org-1", "dep-2")],
    )
    .await;
    subscribe(
        &server,
        "org-2",
        &other_org_rx.uri("/x"),
        &[&contact("org-2", "dep-1")],
    )
    .await;
    subscribe(
        &server,
        "org-1",
        &inbound_rx.uri("/i"),
        &[&inbound("org-1", "dep-1")],
    )
    .await;

    let mut out = inbound_event("evt-out", "org-1", "dep-1", "msg-out");
    out["type"] = json!("message.outbound");
    out["message"]["direction"] = json!("out");
    assert_eq!(
        post_event(&server, "org-1", out).await.1["notifications"],
        1
    );
    let (_, body) = post_event(
        &server,
        "org-1",
        contact_event("evt-c", "contact.updated", "org-1", "dep-1"),
    )
    .await;
    assert_eq!(body["notifications"], 1);

    let o = outbound_rx.wait_for(1, WAIT).await;
    assert_eq!(o[0].json()["event"], outbound);
    assert_eq!(o[0].json()["messageInfo"]["messageId"], "msg-out");
    let c = contact_rx.wait_for(1, WAIT).await;
    assert_eq!(
        c[0].json()["contactInfo"],
        json!({"organizationId": "org-1", "departmentId": "dep-1", "lastUpdated": 1_700_000_000_001i64,
               "contactId": "contact-7", "action": "UPDATED"})
    );
    assert_eq!(c[0].json()["subscriptionId"], contact_sub);
    assert!(c[0].json().get("messageInfo").is_none());

    // An organization cannot inject events into another one.
    let (status, body) = post_event(
        &server,
        "org-1",
        contact_event("evt-x", "contact.created", "org-2", "dep-1"),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("ORGANIZATION_MISMATCH"))
    );

    server.wait_until_idle().await;
    assert_eq!(
        (
            other_dep_rx.count(),
            other_org_rx.count(),
            inbound_rx.count()
        ),
        (0, 0, 0)
    );
    assert_eq!((outbound_rx.count(), contact_rx.count()), (1, 1));
}

#[tokio::test]
async fn a_failing_receiver_gets_the_same_uuid_until_it_accepts() {
    let server = Server::start_with(&[FAST_RETRIES]);
    let inbox = Receiver::start(Handshake::Echo).await;
    subscribe(
        &server,
        "org-1",
        &inbox.uri("/flaky"),
        &[&inbound("org-1", "d")],
    )
    .await;
    inbox.script(&[(500, None), (503, None), (502, None)]);
    post_event(&server, "org-1", inbound_event("evt-r", "org-1", "d", "m")).await;
    let got = inbox.wait_for(4, WAIT).await;
    let ids: Vec<&str> = got.iter().map(|r| r.header("webhook-id")).collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    let uuids: Vec<Value> = got.iter().map(|r| r.json()["uuid"].clone()).collect();
    assert!(uuids.iter().all(|u| *u == uuids[0]));
    assert!(
        got.iter().all(|r| r.body == got[0].body),
        "every attempt sends the same bytes"
    );
    server.wait_until_idle().await;
    assert_eq!(inbox.count(), 4, "nothing is sent again after success");
}

#[tokio::test]
async fn duplicate_event_ids_are_ignored() {
    let server = Server::start_with(&[FAST_RETRIES]);
    let inbox = Receiver::start(Handshake::Echo).await;
    subscribe(
        &server,
        "org-1",
        &inbox.uri("/h"),
        &[&inbound("org-1", "d")],
    )
    .await;
    let event = inbound_event("evt-dup", "org-1", "d", "m");
    assert_eq!(
        post_event(&server, "org-1", event.clone()).await.1["notifications"],
        1
    );
    assert_eq!(
        post_event(&server, "org-1", event).await.1["notifications"],
        0
    );
    inbox.wait_for(1, WAIT).await;
    server.wait_until_idle().await;
    assert_eq!(inbox.count(), 1);
}

#[tokio::test]
async fn gone_blacklists_and_posting_the_uri_again_reactivates() {
    let server = Server::start_with(&[FAST_RETRIES]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let uri = inbox.uri("/gone");
    let (id, _) = subscribe(&server, "org-1", &uri, &[&inbound("org-1", "d")]).await;
    inbox.script(&[(410, None)]);
    post_event(
        &server,
        "org-1",
        inbound_event("evt-g1", "org-1", "d", "m1"),
    )
    .await;
    inbox.wait_for(1, WAIT).await;
    let mut status = Value::Null;
    for _ in 0..100 {
        status = server
            .get(&format!("/webhooksubscription/{id}"), "org-1")
            .await
            .1["status"]
            .clone();
        if status == "BLACKLISTED" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, "BLACKLISTED");
    assert_eq!(
        post_event(
            &server,
            "org-1",
            inbound_event("evt-g2", "org-1", "d", "m2")
        )
        .await
        .1["notifications"],
        0
    );

    let (code, again) = server
        .create("org-1", &uri, &[&inbound("org-1", "d")])
        .await;
    assert_eq!(
        (code, again["id"].as_str(), again["status"].as_str()),
        (StatusCode::OK, Some(id.as_str()), Some("ACTIVE"))
    );
    assert_eq!(
        post_event(
            &server,
            "org-1",
            inbound_event("evt-g3", "org-1", "d", "m3")
        )
        .await
        .1["notifications"],
        1
    );
    let got = inbox.wait_for(2, WAIT).await;
    assert_eq!(got[1].json()["messageInfo"]["messageId"], "m3");
}

#[tokio::test]
async fn failing_past_the_blacklist_window_blacklists() {
    let server = Server::start_with(&[
        (
            "WEBHOOKS_RETRY_SCHEDULE",
            "100ms,100ms,100ms,100ms,100ms,100ms",
        ),
        ("WEBHOOKS_BLACKLIST_AFTER", "250ms"),
    ]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let (id, _) = subscribe(
        &server,
        "org-1",
        &inbox.uri("/down"),
        &[&inbound("org-1", "d")],
    )
    .await;
    inbox.script(&[(500, None); 10]);
    post_event(&server, "org-1", inbound_event("evt-b", "org-1", "d", "m")).await;
    let mut status = Value::Null;
    for _ in 0..200 {
        status = server
            .get(&format!("/webhooksubscription/{id}"), "org-1")
            .await
            .1["status"]
            .clone();
        if status == "BLACKLISTED" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, "BLACKLISTED");
    let attempts = inbox.count();
    // SQS rounds the 100ms retry delay up to a second, so fewer attempts fit there.
    assert!(
        (2..=6).contains(&attempts),
        "{attempts} attempts before blacklisting"
    );
    server.wait_until_idle().await;
    assert_eq!(inbox.count(), attempts, "no attempt after blacklisting");
}

#[tokio::test]
async fn retries_stop_after_the_schedule_and_honour_retry_after() {
    let server = Server::start_with(&[("WEBHOOKS_RETRY_SCHEDULE", "100ms,1s")]);
    let inbox = Receiver::start(Handshake::Echo).await;
    subscribe(
        &server,
        "org-1",
        &inbox.uri("/busy"),
        &[&inbound("org-1", "d")],
    )
    .await;
    // 429 asks for 30s: clamped to the schedule's longest delay (1s), not the 100ms step.
    inbox.script(&[(429, Some("30")), (500, None), (500, None), (500, None)]);
    post_event(&server, "org-1", inbound_event("evt-s", "org-1", "d", "m")).await;
    let got = inbox.wait_for(3, WAIT).await;
    let gap = got[1].at - got[0].at;
    assert!(
        gap >= Duration::from_millis(900),
        "Retry-After honoured: {gap:?}"
    );
    server.wait_until_idle().await;
    assert_eq!(
        inbox.count(),
        3,
        "1 attempt + 2 retries, then dead-lettered"
    );
}

#[tokio::test]
async fn bad_events_get_problem_json() {
    let server = Server::start();
    for (event, field) in [
        (
            json!({"organizationId": "org-1", "departmentId": "d"}),
            "type",
        ),
        (
            json!({"type": "message.sideways", "organizationId": "org-1", "departmentId": "d"}),
            "type",
        ),
        (
            json!({"type": "message.inbound", "organizationId": "org-1", "departmentId": "d"}),
            "message",
        ),
        (
            json!({"type": "contact.created", "organizationId": "org-1", "departmentId": "d/x", "contact": {"id": "c"}}),
            "departmentId",
        ),
        (
            json!({"type": "message.inbound", "organizationId": "org-1", "departmentId": "d", "message": {"id": ""}}),
            "message.id",
        ),
    ] {
        let (status, body) = post_event(&server, "org-1", event).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("VALIDATION_FAILED")),
            "{body}"
        );
        assert_eq!(body["errors"][0]["field"], field, "{body}");
    }
    let read_only = server.token_with("org-1", &["webhooks/read"]);
    let (status, body) = send(
        server
            .http
            .post(server.url("/events"))
            .header("x-api-key", &server.key)
            .bearer_auth(read_only)
            .json(&inbound_event("e", "org-1", "d", "m")),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("INSUFFICIENT_SCOPE"))
    );
}

#[tokio::test]
async fn the_listen_command_verifies_signatures() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let server = Server::start_with(&[FAST_RETRIES]);
    // Subscribe a placeholder first to learn the secret, then point a real `listen --secret` at it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut placeholder = Command::new(BIN)
        .args(["listen", "--port", &port.to_string()])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(placeholder.stderr.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let (_, secret) = subscribe(
        &server,
        "org-1",
        &format!("http://127.0.0.1:{port}/hook"),
        &[&inbound("org-1", "d")],
    )
    .await;
    placeholder.kill().unwrap();
    placeholder.wait().unwrap();

    let mut listener = Command::new(BIN)
        .args(["listen", "--port", &port.to_string(), "--secret", &secret])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(listener.stderr.take().unwrap());
    let mut banner = String::new();
    stderr.read_line(&mut banner).unwrap();
    post_event(
        &server,
        "org-1",
        inbound_event("evt-l", "org-1", "d", "m-l"),
    )
    .await;
    let mut verdict = String::new();
    stderr.read_line(&mut verdict).unwrap();
    let mut printed = String::new();
    BufReader::new(listener.stdout.take().unwrap())
        .read_line(&mut printed)
        .unwrap();
    listener.kill().unwrap();
    listener.wait().unwrap();
    assert!(verdict.contains("signature verified"), "{verdict}");
    let printed: Value = serde_json::from_str(&printed).unwrap();
    assert_eq!(printed["messageInfo"]["messageId"], "m-l");
}

/// Posts the events numbered `range` (10 posters at once), each accepted.
async fn post_wave(server: &Server, range: std::ops::Range<usize>) {
    let posts = range.map(|n| async move {
        let event = inbound_event(&format!("evt-{n}"), "org-1", "d", &format!("m-{n}"));
        // A loaded moto can answer 503 for a while: `produce` retries those.
        assert_eq!(produce(server, "org-1", &event).await, StatusCode::ACCEPTED);
    });
    futures_util::stream::iter(posts)
        .buffer_unordered(10)
        .collect::<Vec<()>>()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_lost_when_the_server_is_killed() {
    let mut server = Server::start_with(&[FAST_RETRIES, ("WEBHOOKS_DELIVERY_CONCURRENCY", "16")]);
    let inbox = Receiver::start(Handshake::Echo).await;
    subscribe(
        &server,
        "org-1",
        &inbox.uri("/slow"),
        &[&inbound("org-1", "d")],
    )
    .await;
    inbox.slow(Duration::from_millis(200));
    // Ten waves (200 events on every commit, 1,000 in the full tier), each posted once
    // all but the last wave have arrived, the kill after the sixth. moto computes every
    // queue attribute, a scan of the whole queue, per message: scripts/moto_server.py
    // removes that from ReceiveMessage, but SendMessage still does it, so a queue 1,000
    // deep costs moto minutes of CPU on a loaded 2-core machine (SQS has no such cost).
    // At most two waves are outstanding, so the kill still finds calls in flight and
    // jobs queued behind them.
    let total = testkit::size::scaled(200, 1000);
    let wave = total / 10;
    let mut before = 0;
    for w in 0..10 {
        if w >= 2 {
            inbox.wait_for_unique((w - 1) * wave, SLOW_WAIT).await;
        }
        post_wave(&server, w * wave..(w + 1) * wave).await;
        if w == 5 {
            // kill -9 mid-flight: 16 calls out, the rest of the backlog queued.
            before = inbox.count();
            server = server.crash_and_restart();
            inbox.slow(Duration::ZERO);
        }
    }
    let got = inbox.wait_for_unique(total, SLOW_WAIT).await;
    let mut counts: HashMap<String, usize> = HashMap::new();
    for r in &got {
        *counts.entry(r.header("webhook-id").to_owned()).or_default() += 1;
    }
    let duplicates: usize = counts.values().map(|c| c - 1).sum();
    println!("crash test: {before} delivered before kill -9, {} unique uuids after restart, {duplicates} duplicates", counts.len());
    assert_eq!(counts.len(), total, "every notification arrived");
    // And the history of every one ends DELIVERED (its outcome is recorded
    // before its job is completed, so a kill cannot lose it).
    let (_, subs) = server.get("/webhooksubscription/all", "org-1").await;
    let sub_id = subs["content"][0]["id"].as_str().unwrap().to_owned();
    let started = std::time::Instant::now();
    loop {
        let (status, page) = server
            .get(
                &format!("/webhooksubscription/{sub_id}/notifications?status=DELIVERED&size=1"),
                "org-1",
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{page}");
        if page["totalElements"] == total {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "history: {} of {total} DELIVERED",
            page["totalElements"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 39: the fan-out read is strongly consistent, so an event posted
/// right after a create's 200 reaches the new subscription, every time.
/// Each round is a new subscription under a department of its own, so the
/// event can match nothing else.
#[tokio::test]
async fn an_event_right_after_a_create_reaches_the_new_subscription() {
    let server = Server::start_with(&[FAST_RETRIES]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let rounds = testkit::size::scaled(30, 200);
    for i in 0..rounds {
        let dep = format!("dep-rw-{i}");
        subscribe(
            &server,
            "org-rw",
            &inbox.uri(&format!("/rw/{i}")),
            &[&inbound("org-rw", &dep)],
        )
        .await;
        let (status, body) = post_event(
            &server,
            "org-rw",
            inbound_event(&format!("evt-rw-{i}"), "org-rw", &dep, "m"),
        )
        .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        assert_eq!(
            body["notifications"], 1,
            "round {i}: the event saw its subscription"
        );
    }
    inbox.wait_for_unique(rounds, WAIT).await;
}
