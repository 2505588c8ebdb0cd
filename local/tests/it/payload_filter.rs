//! A subscription's payload filter (`payloadFilter`, issue 46), end to end on both backends
//! (SQLite, or `--backend aws` on DynamoDB Local and moto with WEBHOOKS_TEST_BACKEND=aws):
//!
//! - the field: validated within its documented limits (each accepted at the limit, refused
//!   one past it with `400 VALIDATION_FAILED` naming `payloadFilter`), shown by create, get
//!   and list, kept by an update that does not name it, replaced by one that does, removed by
//!   `null`, kept across a restart; absent for a subscription that never had one;
//! - fan-out: an event a subscription's filter refuses creates nothing for it: no job on the
//!   delivery queue (the SQLite rows, the SQS messages), no history item, no call.

use crate::common;

use common::*;
use http::StatusCode;
use serde_json::{json, Value};
use webhook_core::payload_filter::{MAX_BRANCHES, MAX_BYTES, MAX_DEPTH, MAX_OPERANDS};

/// Creates (or updates) `org`'s subscription of `uri`, with `extra` members.
async fn post(server: &Server, org: &str, uri: &str, extra: Value) -> (StatusCode, Value) {
    post_subscription(server, org, uri, inbound(org, "dep"), extra).await
}

/// What get and list show of subscription `id`'s `payloadFilter`.
async fn shown(server: &Server, org: &str, id: &str) -> Value {
    shown_field(server, org, id, "payloadFilter").await
}

/// Nested `$not`s, `depth` filters in all.
fn nested(depth: usize) -> Value {
    (1..depth).fold(json!({"a": 1}), |inner, _| json!({"$not": inner}))
}

#[tokio::test]
async fn the_payload_filter_is_validated_shown_replaced_removed_and_kept() {
    let server = Server::start();
    let inbox = Receiver::start(Handshake::Echo).await;
    let uri = inbox.uri("/hook");
    let org = "org-pf-field";

    let operands = |n: usize| json!({"message.to": {"$in": (0..n).map(|i| format!("+1555{i:07}")).collect::<Vec<_>>()}});
    let branches = |n: usize| json!({"$or": (0..n).map(|i| json!({"a": i})).collect::<Vec<_>>()});
    // `{"a":"…"}` is 8 bytes around the string.
    let sized = |n: usize| json!({"a": "x".repeat(n - 8)});
    for (at_limit, past, says) in [
        (nested(MAX_DEPTH), nested(MAX_DEPTH + 1), "deep"),
        (
            operands(MAX_OPERANDS),
            operands(MAX_OPERANDS + 1),
            "values in all",
        ),
        (
            branches(MAX_BRANCHES),
            branches(MAX_BRANCHES + 1),
            "filters",
        ),
        (sized(MAX_BYTES), sized(MAX_BYTES + 1), "bytes"),
    ] {
        let (status, body) = post(&server, org, &uri, json!({"payloadFilter": past})).await;
        assert_invalid(status, &body, "payloadFilter", says);
        let message = body["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
        let (status, body) = post(&server, org, &uri, json!({"payloadFilter": at_limit})).await;
        assert_eq!(status, StatusCode::OK, "{says} at the limit: {body}");
        assert_eq!(body["payloadFilter"], at_limit);
    }
    for bad in [
        json!([]),
        json!("x"),
        json!({}),
        json!({"message.to": {"$regex": ".*"}}),
        json!({"message.to": ["+1"]}),
        json!({"$or": [{"a": 1}, {"b": {"$gt": "5"}}]}),
    ] {
        let (status, body) = post(&server, org, &uri, json!({"payloadFilter": bad})).await;
        assert_invalid(status, &body, "payloadFilter", &format!("{bad}"));
    }

    let other = Receiver::start(Handshake::Echo).await;
    let (status, plain) = post(&server, org, &other.uri("/hook"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{plain}");
    assert!(
        plain.get("payloadFilter").is_none(),
        "the original interface: {plain}"
    );

    let first = json!({"message.to": "+15550001"});
    let (_, set) = post(&server, org, &uri, json!({"payloadFilter": first})).await;
    let id = set["id"].as_str().unwrap().to_owned();
    assert_eq!(shown(&server, org, &id).await, first);
    let (_, renewed) = post(&server, org, &uri, json!({"expiresDateInMillies": 0})).await;
    assert_eq!(
        renewed["payloadFilter"], first,
        "absent keeps it: {renewed}"
    );
    let second =
        json!({"$or": [{"message.to": "+15550002"}, {"messageInfo.status": {"$in": ["FAILED"]}}]});
    let (_, replaced) = post(&server, org, &uri, json!({"payloadFilter": second})).await;
    assert_eq!(replaced["payloadFilter"], second);
    let server = server.restart();
    assert_eq!(
        shown(&server, org, &id).await,
        second,
        "kept across a restart"
    );
    let (_, removed) = post(&server, org, &uri, json!({"payloadFilter": null})).await;
    assert!(
        removed.get("payloadFilter").is_none(),
        "null removes it: {removed}"
    );
    assert_eq!(shown(&server, org, &id).await, Value::Null);
}

/// A message event of `org`'s department `dep` to `to`.
fn message_to(id: &str, org: &str, to: &str) -> Value {
    json!({"eventId": id, "type": "message.inbound", "organizationId": org, "departmentId": "dep",
           "status": "RECEIVED", "message": {"id": format!("msg-{id}"), "to": [to], "from": "+15559999", "text": "hi"}})
}

/// POSTs an event; how many notifications the service says it queued.
async fn queued_for(server: &Server, org: &str, event: &Value) -> u64 {
    let (status, body) = send(
        server
            .req(reqwest::Method::POST, "/events", org)
            .json(event),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    body["notifications"].as_u64().unwrap()
}

/// Every job the server's delivery queue holds or ever held for `subscription`: on SQLite
/// its rows (the history is the queue); on SQS, the messages of the queue, visible, in
/// flight or delayed (exact on moto), of every subscription.
async fn queue_count(server: &Server, subscription: &str) -> u64 {
    if !aws_backend() {
        let db = rusqlite::Connection::open_with_flags(
            server.sqlite_file(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        return db
            .query_row(
                "SELECT count(*) FROM notifications WHERE subscription_id = ?1",
                [subscription],
                |r| r.get(0),
            )
            .unwrap();
    }
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let prefix = server.env_var("WEBHOOKS_SUBSCRIPTIONS_TABLE").unwrap();
    let url = sqs
        .get_queue_url()
        .queue_name(format!("{prefix}-delivery"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    sqs_depth(&sqs, &url).await
}

/// How many notifications subscription `id`'s history lists.
async fn history(server: &Server, org: &str, id: &str) -> u64 {
    let (status, page) = server
        .get(&format!("/webhooksubscription/{id}/notifications"), org)
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["totalElements"].as_u64().unwrap()
}

#[tokio::test]
async fn an_event_the_filter_refuses_creates_no_job_no_history_and_no_call() {
    // Held calls stay in flight (on SQS: not visible, still counted) while the test counts.
    let server = Server::start_with(&[("WEBHOOKS_DELIVERY_TIMEOUT_MS", "60000")]);
    let org = "org-pf-fanout";
    let wanted = Receiver::start(Handshake::Echo).await;
    let refused = Receiver::start(Handshake::Echo).await;
    let filter = json!({"message.to": {"$in": ["+15550001", "+15550002"]}});
    let (_, a) = post(
        &server,
        org,
        &wanted.uri("/hook"),
        json!({"payloadFilter": filter}),
    )
    .await;
    let never = json!({"messageInfo.status": "NEVER"});
    let (_, b) = post(
        &server,
        org,
        &refused.uri("/hook"),
        json!({"payloadFilter": never}),
    )
    .await;
    let (a, b) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());

    wanted.hold();
    let mut matching = Vec::new();
    for (i, to) in ["+15550001", "+15550003", "+15550002", "+15559000"]
        .iter()
        .enumerate()
    {
        let id = format!("evt-pf-{i}");
        let queued = queued_for(&server, org, &message_to(&id, org, to)).await;
        let matches = to.ends_with('1') || to.ends_with('2');
        assert_eq!(queued, u64::from(matches), "{id} to {to}");
        if matches {
            matching.push(format!("msg-{id}"));
        }
    }
    // Only the two matching events' jobs exist, for `a`; none for `b`.
    assert_eq!(queue_count(&server, a).await, 2);
    if !aws_backend() {
        assert_eq!(queue_count(&server, b).await, 0);
    }
    assert_eq!(
        (
            history(&server, org, a).await,
            history(&server, org, b).await
        ),
        (2, 0)
    );

    wanted.release();
    server.wait_until_idle().await;
    let mut got: Vec<String> = wanted
        .received()
        .iter()
        .map(|r| {
            r.json()["messageInfo"]["messageId"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    got.sort();
    got.dedup();
    assert_eq!(got, matching);
    assert_eq!(refused.count(), 0, "the refused subscription got no call");
    assert_eq!(
        (
            history(&server, org, a).await,
            history(&server, org, b).await
        ),
        (2, 0)
    );
}
