//! A subscription's own headers (`customHeaders`, issue 46), end to end on both backends
//! (SQLite, or `--backend aws` on DynamoDB Local and moto with WEBHOOKS_TEST_BACKEND=aws):
//!
//! - the field: each documented limit accepted at the limit and refused one past it with
//!   `400 VALIDATION_FAILED` naming `customHeaders`; reserved names, bad values and a masked
//!   value sent back refused; shown masked by create, get and list; kept by an update that does
//!   not name it, replaced by one that does, removed by `null`, kept across a restart;
//! - the delivery: the receiver sees the headers on the handshake and on every POST, beside
//!   the Standard Webhooks headers the service sets; a re-post's new set on the next POST.

use crate::common;

use common::*;
use http::StatusCode;
use serde_json::{json, Value};
use testkit::receiver::Received;
use webhook_core::custom_headers::{MAX_HEADERS, MAX_NAME_BYTES, MAX_TOTAL_BYTES, MAX_VALUE_BYTES};

/// Creates (or updates) `org`'s subscription of `uri`, with `extra` members.
async fn post(server: &Server, org: &str, uri: &str, extra: Value) -> (StatusCode, Value) {
    post_subscription(server, org, uri, inbound(org, "dep"), extra).await
}

/// What get and list show of subscription `id`'s `customHeaders`.
async fn shown(server: &Server, org: &str, id: &str) -> Value {
    shown_field(server, org, id, "customHeaders").await
}

/// `n` headers `X-H<i>`, each value `len` bytes.
fn headers(n: usize, len: usize) -> Value {
    Value::Object(
        (0..n)
            .map(|i| (format!("X-H{i}"), json!("v".repeat(len))))
            .collect(),
    )
}

/// A `400 VALIDATION_FAILED` whose first error names `customHeaders` (or one of its
/// headers) and says `says`.
fn refused(status: StatusCode, body: &Value, says: &str) {
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("VALIDATION_FAILED")),
        "{says}: {body}"
    );
    let field = body["errors"][0]["field"].as_str().unwrap();
    assert!(field.starts_with("customHeaders"), "{says}: {field}");
    let message = body["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains(says), "{says}: {message}");
}

#[tokio::test]
async fn custom_headers_are_validated_shown_masked_replaced_removed_and_kept() {
    let server = Server::start();
    let inbox = Receiver::start(Handshake::Echo).await;
    let uri = inbox.uri("/hook");
    let org = "org-ch-field";

    // Four headers named `X-H0`..`X-H3` (4 bytes each): their values fill the total.
    let total = |n: usize| {
        let mut h = headers(4, (MAX_TOTAL_BYTES - 16) / 4);
        h["X-H0"] = json!("v".repeat(n - 16 - 3 * ((MAX_TOTAL_BYTES - 16) / 4)));
        h
    };
    let named = |len: usize| json!({ format!("X-{}", "n".repeat(len - 2)): "v" });
    for (at_limit, past, says) in [
        (
            headers(MAX_HEADERS, 1),
            headers(MAX_HEADERS + 1, 1),
            "headers",
        ),
        (named(MAX_NAME_BYTES), named(MAX_NAME_BYTES + 1), "name"),
        (
            headers(1, MAX_VALUE_BYTES),
            headers(1, MAX_VALUE_BYTES + 1),
            "value",
        ),
        (
            total(MAX_TOTAL_BYTES),
            total(MAX_TOTAL_BYTES + 1),
            "together",
        ),
    ] {
        let (status, body) = post(&server, org, &uri, json!({"customHeaders": past})).await;
        refused(status, &body, says);
        let (status, body) = post(&server, org, &uri, json!({"customHeaders": at_limit})).await;
        assert_eq!(status, StatusCode::OK, "{says} at the limit: {body}");
        let names: Vec<&String> = body["customHeaders"].as_object().unwrap().keys().collect();
        assert_eq!(
            names,
            at_limit.as_object().unwrap().keys().collect::<Vec<_>>()
        );
    }
    for reserved in [
        "webhook-signature",
        "Webhook-Id",
        "webhook-timestamp",
        "traceparent",
        "tracestate",
        "Host",
        "Content-Length",
        "Content-Type",
        "Connection",
        "Keep-Alive",
        "Proxy-Authorization",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
        "User-Agent",
        "validation-token",
    ] {
        let (status, body) = post(
            &server,
            org,
            &uri,
            json!({"customHeaders": {reserved: "x"}}),
        )
        .await;
        assert_invalid(
            status,
            &body,
            &format!("customHeaders.{reserved}"),
            reserved,
        );
    }
    for (bad, says) in [
        (json!({"X-A": "one\r\nX-Injected: two"}), "printable ASCII"),
        (json!({"X-A": "…abcd"}), "masked"),
        (json!({"X-A": 1}), "string"),
        (json!({"X A": "v"}), "letters"),
        (json!({"X-A": "1", "x-a": "2"}), "case-insensitive"),
    ] {
        let (status, body) = post(&server, org, &uri, json!({"customHeaders": bad})).await;
        refused(status, &body, says);
    }
    for bad in [json!(["X-A"]), json!("X-A: v")] {
        let (status, body) = post(&server, org, &uri, json!({"customHeaders": bad})).await;
        assert_invalid(status, &body, "customHeaders", &format!("{bad}"));
    }

    let other = Receiver::start(Handshake::Echo).await;
    let (status, plain) = post(&server, org, &other.uri("/hook"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{plain}");
    assert!(
        plain.get("customHeaders").is_none(),
        "the original interface: {plain}"
    );

    let token = "Bearer 0123456789abcdef";
    let first = json!({"Authorization": token, "X-Route": "eu"});
    let (_, set) = post(&server, org, &uri, json!({"customHeaders": first})).await;
    let id = set["id"].as_str().unwrap().to_owned();
    let masked = json!({"Authorization": "…cdef", "X-Route": "…"});
    assert_eq!(set["customHeaders"], masked, "the create shows them masked");
    assert_eq!(shown(&server, org, &id).await, masked);
    let (_, renewed) = post(&server, org, &uri, json!({"expiresDateInMillies": 0})).await;
    assert_eq!(
        renewed["customHeaders"], masked,
        "absent keeps them: {renewed}"
    );
    let (status, body) = post(&server, org, &uri, json!({"customHeaders": masked})).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "a masked value sent back: {body}"
    );
    let (_, replaced) = post(
        &server,
        org,
        &uri,
        json!({"customHeaders": {"X-Other": "1"}}),
    )
    .await;
    assert_eq!(replaced["customHeaders"], json!({"X-Other": "…"}));
    let server = server.restart();
    assert_eq!(
        shown(&server, org, &id).await,
        json!({"X-Other": "…"}),
        "kept across a restart"
    );
    let (_, removed) = post(&server, org, &uri, json!({"customHeaders": null})).await;
    assert!(
        removed.get("customHeaders").is_none(),
        "null removes them: {removed}"
    );
    assert_eq!(shown(&server, org, &id).await, Value::Null);
}

/// An inbound message event of `org`'s department `dep`.
fn message(id: &str, org: &str) -> Value {
    json!({"eventId": id, "type": "message.inbound", "organizationId": org, "departmentId": "dep",
           "status": "RECEIVED", "message": {"id": format!("msg-{id}"), "to": ["+15550001"], "from": "+15559999", "text": "hi"}})
}

fn header<'a>(r: &'a Received, name: &str) -> &'a str {
    r.header(name)
}

#[tokio::test]
async fn the_handshake_and_every_post_carry_the_custom_headers() {
    let server = Server::start();
    let org = "org-ch-delivery";
    let inbox = Receiver::start(Handshake::Echo).await;
    let uri = inbox.uri("/hook");
    let first = json!({"Authorization": "Bearer first-token", "X-Route": "eu"});
    let (status, body) = post(&server, org, &uri, json!({"customHeaders": first})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let handshake = inbox.handshakes().pop().unwrap();
    assert_eq!(handshake["authorization"], "Bearer first-token");
    assert_eq!(handshake["x-route"], "eu");
    assert!(handshake.contains_key("validation-token"));

    assert_eq!(
        produce(&server, org, &message("evt-ch-1", org)).await,
        StatusCode::ACCEPTED
    );
    let got = inbox.wait_for(1, std::time::Duration::from_secs(30)).await;
    let r = &got[0];
    assert_eq!(header(r, "authorization"), "Bearer first-token");
    assert_eq!(header(r, "x-route"), "eu");
    assert_eq!(header(r, "content-type"), "application/json");
    assert!(!header(r, "webhook-id").is_empty() && !header(r, "webhook-signature").is_empty());
    assert_eq!(r.headers.get_all("authorization").iter().count(), 1);

    // A re-post replaces the set: the next POST has the new one only.
    let second = json!({"Authorization": "Bearer second-token"});
    let (status, body) = post(&server, org, &uri, json!({"customHeaders": second})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        produce(&server, org, &message("evt-ch-2", org)).await,
        StatusCode::ACCEPTED
    );
    let got = inbox.wait_for(2, std::time::Duration::from_secs(30)).await;
    let r = got
        .iter()
        .find(|r| r.json()["messageInfo"]["messageId"] == "msg-evt-ch-2")
        .unwrap();
    assert_eq!(header(r, "authorization"), "Bearer second-token");
    assert!(
        r.headers.get("x-route").is_none(),
        "the replaced set's other header is gone"
    );
}
