//! `v1a` (ed25519) signatures per subscription (`signatureScheme`, issue 46), end to end on
//! both backends (SQLite, or DynamoDB Local and moto with `WEBHOOKS_TEST_BACKEND=aws`): the
//! real binary, a real receiver, and every `v1a` signature verified with `ed25519-dalek`, an
//! ed25519 the service does not use (`testkit::standard_webhooks`):
//!
//! - opted in at create: shown by create, get and list; its public key (`whpk_`) read from
//!   `GET .../secret`, which never answers the private key; notifications carry one `v1a`
//!   signature, that public key verifies it and another does not;
//! - rotation with overlap: both keys' signatures during the grace period, each verified by
//!   its own public key; only the new one's after;
//! - switching a `v1` subscription to `v1a` (an update naming it): the old secret's `v1`
//!   signature beside the new key's `v1a` for the default grace period;
//! - a malformed `signatureScheme` refused with `400` naming it, on create and on rotate, and
//!   a key of the client's own refused for `v1a`.

use crate::common;

use std::time::Duration;

use common::*;
use http::StatusCode;
use reqwest::Method;
use serde_json::{json, Value};
use testkit::standard_webhooks::{verify, Check};

const WAIT: Duration = Duration::from_secs(20);

fn event(id: &str, org: &str) -> Value {
    json!({"eventId": id, "type": "contact.updated", "organizationId": org, "departmentId": "d",
           "contact": {"id": "contact-1"}})
}

/// Creates (or updates) `org`'s subscription of `uri`, with `extra` members.
async fn post(server: &Server, org: &str, uri: &str, extra: Value) -> (StatusCode, Value) {
    post_subscription(server, org, uri, contact(org, "d"), extra).await
}

async fn secret(server: &Server, org: &str, id: &str) -> Value {
    let (status, body) = server
        .get(&format!("/webhooksubscription/{id}/secret"), org)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// The public key `GET .../secret` answers, after checking it answers nothing else.
async fn public_key(server: &Server, org: &str, id: &str) -> String {
    let body = secret(server, org, id).await;
    let members: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert_eq!(members, ["publicKey"], "never the private key: {body}");
    let key = body["publicKey"].as_str().unwrap().to_owned();
    assert!(key.starts_with("whpk_"), "{key}");
    key
}

async fn rotate(server: &Server, org: &str, id: &str, body: Value) -> (StatusCode, Value) {
    send(
        server
            .req(
                Method::POST,
                &format!("/webhooksubscription/{id}/secret/rotate"),
                org,
            )
            .json(&body),
    )
    .await
}

async fn post_event(server: &Server, org: &str, event: Value) {
    let (status, body) = send(server.req(Method::POST, "/events", org).json(&event)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
}

fn whole(secret: &str) -> Check<'_> {
    Check {
        secret,
        signature: None,
    }
}

fn alone<'a>(secret: &'a str, signature: &'a str) -> Check<'a> {
    Check {
        secret,
        signature: Some(signature),
    }
}

/// What get and list show of subscription `id`'s `signatureScheme`.
async fn shown(server: &Server, org: &str, id: &str) -> Value {
    shown_field(server, org, id, "signatureScheme").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1a_subscription_is_signed_with_ed25519_and_its_public_key_verifies_across_a_rotation() {
    let server = Server::start();
    let inbox = Receiver::start(Handshake::Echo).await;
    let org = "org-v1a";
    let (status, sub) = post(
        &server,
        org,
        &inbox.uri("/hook"),
        json!({"signatureScheme": "v1a"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    assert_eq!(sub["signatureScheme"], "v1a", "{sub}");
    let id = sub["id"].as_str().unwrap().to_owned();
    assert_eq!(shown(&server, org, &id).await, "v1a");
    let old = public_key(&server, org, &id).await;

    // Another subscription's public key: a key that must not verify.
    let other_inbox = Receiver::start(Handshake::Echo).await;
    let (_, other) = post(
        &server,
        org,
        &other_inbox.uri("/other"),
        json!({"signatureScheme": "v1a"}),
    )
    .await;
    let stranger = public_key(&server, org, other["id"].as_str().unwrap()).await;
    assert_ne!(stranger, old);

    post_event(&server, org, event("evt-1", org)).await;
    let first = inbox.wait_for(1, WAIT).await.remove(0);
    let header = first.header("webhook-signature").to_owned();
    assert!(
        header.starts_with("v1a,") && !header.contains(' '),
        "one v1a signature: {header}"
    );
    assert_eq!(
        verify(&first, &[whole(&old), whole(&stranger)]),
        [true, false],
        "its public key verifies it, another does not"
    );
    let forged = format!("v1a,{}", "A".repeat(86) + "==");
    assert_eq!(
        verify(&first, &[alone(&old, &forged)]),
        [false],
        "a forged signature does not verify"
    );

    // Rotation with overlap: the answer is the new public key, never the private one.
    let grace = Duration::from_secs(60);
    let (status, body) = rotate(
        &server,
        org,
        &id,
        json!({"gracePeriodSeconds": grace.as_secs()}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let members: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert_eq!(members, ["publicKey"], "{body}");
    let new = body["publicKey"].as_str().unwrap().to_owned();
    assert!(new.starts_with("whpk_") && new != old);
    assert_eq!(
        public_key(&server, org, &id).await,
        new,
        "GET secret: the current key"
    );
    assert_eq!(
        shown(&server, org, &id).await,
        "v1a",
        "a rotation keeps the scheme"
    );

    post_event(&server, org, event("evt-2", org)).await;
    let during = inbox.wait_for(2, WAIT).await.remove(1);
    let header = during.header("webhook-signature").to_owned();
    let signatures: Vec<&str> = header.split(' ').collect();
    assert_eq!(signatures.len(), 2, "both keys sign: {header}");
    assert!(signatures.iter().all(|s| s.starts_with("v1a,")), "{header}");
    assert_eq!(
        verify(
            &during,
            &[
                whole(&old),
                whole(&new),
                alone(&new, signatures[0]),
                alone(&old, signatures[0]),
                alone(&old, signatures[1]),
                alone(&new, signatures[1]),
            ]
        ),
        [true, true, true, false, true, false],
        "either public key verifies the header; the first signature is the new key's"
    );

    server.advance_clock(grace + Duration::from_secs(1));
    post_event(&server, org, event("evt-3", org)).await;
    let after = inbox.wait_for(3, WAIT).await.remove(2);
    let header = after.header("webhook-signature");
    assert_eq!(
        header.split(' ').count(),
        1,
        "only the new key signs: {header}"
    );
    assert_eq!(verify(&after, &[whole(&new), whole(&old)]), [true, false]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1_subscription_switched_to_v1a_is_signed_with_both_during_the_overlap() {
    let server = Server::start();
    let inbox = Receiver::start(Handshake::Echo).await;
    let org = "org-v1a-switch";
    let uri = inbox.uri("/switch");
    let (status, sub) = post(&server, org, &uri, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    assert!(
        sub.get("signatureScheme").is_none(),
        "v1 is the default, not shown: {sub}"
    );
    let id = sub["id"].as_str().unwrap().to_owned();
    let body = secret(&server, org, &id).await;
    let hmac = body["key"].as_str().unwrap().to_owned();
    assert!(
        hmac.starts_with("whsec_") && body.get("publicKey").is_none(),
        "{body}"
    );

    // Naming the same scheme again changes nothing; naming v1a rotates to an ed25519 key.
    let (status, sub) = post(&server, org, &uri, json!({"signatureScheme": "v1"})).await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    assert_eq!(secret(&server, org, &id).await["key"], hmac.as_str());
    let (status, sub) = post(&server, org, &uri, json!({"signatureScheme": "v1a"})).await;
    assert_eq!(
        (status, sub["id"].as_str()),
        (StatusCode::OK, Some(id.as_str())),
        "{sub}"
    );
    assert_eq!(sub["signatureScheme"], "v1a", "{sub}");
    let public = public_key(&server, org, &id).await;

    post_event(&server, org, event("evt-switch", org)).await;
    let during = inbox.wait_for(1, WAIT).await.remove(0);
    let header = during.header("webhook-signature").to_owned();
    let signatures: Vec<&str> = header.split(' ').collect();
    assert_eq!(signatures.len(), 2, "{header}");
    assert!(
        signatures[0].starts_with("v1a,") && signatures[1].starts_with("v1,"),
        "{header}"
    );
    assert_eq!(
        verify(&during, &[whole(&public), whole(&hmac)]),
        [true, true],
        "the new public key and the old secret both verify during the default grace period"
    );

    // Back to v1 by a rotation naming it: an HMAC secret again, answered as `key`.
    let (status, body) = rotate(
        &server,
        org,
        &id,
        json!({"signatureScheme": "v1", "gracePeriodSeconds": 0}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body["key"].as_str().unwrap().starts_with("whsec_") && body.get("publicKey").is_none(),
        "{body}"
    );
    assert!(shown(&server, org, &id).await.is_null());
}

#[tokio::test]
async fn a_malformed_signature_scheme_is_refused_naming_the_field() {
    let server = Server::start();
    let inbox = Receiver::start(Handshake::Echo).await;
    let org = "org-v1a-bad";
    for bad in [json!("v2"), json!("V1A"), json!(""), json!("ed25519")] {
        let (status, body) = post(
            &server,
            org,
            &inbox.uri("/bad"),
            json!({"signatureScheme": bad}),
        )
        .await;
        assert_invalid(status, &body, "signatureScheme", &bad.to_string());
    }
    let (status, body) = post(
        &server,
        org,
        &inbox.uri("/bad"),
        json!({"signatureScheme": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body.to_string().contains("signatureScheme"),
        "names the field: {body}"
    );
    let (_, all) = server.get("/webhooksubscription/all", org).await;
    assert_eq!(all["content"], json!([]), "nothing was created");

    let (status, sub) = post(
        &server,
        org,
        &inbox.uri("/good"),
        json!({"signatureScheme": "v1a"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    let id = sub["id"].as_str().unwrap();
    let own = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    for (input, field) in [
        (json!({"signatureScheme": "v3"}), "signatureScheme"),
        (json!({"signatureScheme": "v1a", "key": own}), "key"),
        (json!({"key": "whsk_AAAA"}), "key"),
    ] {
        let (status, body) = rotate(&server, org, id, input.clone()).await;
        assert_invalid(status, &body, field, &input.to_string());
        assert!(
            !body.to_string().contains("MDEyMzQ1"),
            "never the key echoed: {body}"
        );
    }
}
