//! Signing-secret rotation end to end: the real binary (SQLite, or DynamoDB
//! Local with `WEBHOOKS_TEST_BACKEND=aws`), a real receiver, and every
//! signature checked with the Standard Webhooks Python library.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
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

async fn subscribe(server: &Server, org: &str, uri: &str) -> (String, String) {
    let (status, sub) = server.create(org, uri, &[&contact(org, "d")]).await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    let id = sub["id"].as_str().unwrap().to_owned();
    (id.clone(), current_key(server, org, &id).await)
}

async fn current_key(server: &Server, org: &str, id: &str) -> String {
    let (status, body) = server
        .get(&format!("/webhooksubscription/{id}/secret"), org)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["key"].as_str().unwrap().to_owned()
}

async fn rotate(server: &Server, org: &str, id: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut req = server.req(
        Method::POST,
        &format!("/webhooksubscription/{id}/secret/rotate"),
        org,
    );
    if let Some(body) = body {
        req = req.json(&body);
    }
    send(req).await
}

async fn post_event(server: &Server, org: &str, event: Value) {
    let (status, body) = send(server.req(Method::POST, "/events", org).json(&event)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["notifications"], 1, "{body}");
}

fn alone<'a>(secret: &'a str, signature: &'a str) -> Check<'a> {
    Check {
        secret,
        signature: Some(signature),
    }
}

fn whole(secret: &str) -> Check<'_> {
    Check {
        secret,
        signature: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_subscription_is_signed_with_both_keys_until_the_grace_period_ends() {
    let server = Server::start();
    let inbox = Receiver::start(Handshake::Echo).await;
    let (id, old) = subscribe(&server, "org-1", &inbox.uri("/hook")).await;

    // Short enough that a timestamp signed on the moved clock is within the
    // verifier's tolerance (5 minutes).
    let grace = Duration::from_secs(60);
    let (status, body) = rotate(
        &server,
        "org-1",
        &id,
        Some(json!({"gracePeriodSeconds": grace.as_secs()})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let new = body["key"].as_str().unwrap().to_owned();
    assert!(new.starts_with("whsec_") && new != old);
    assert_eq!(
        current_key(&server, "org-1", &id).await,
        new,
        "GET secret: the current key"
    );

    post_event(&server, "org-1", event("evt-during", "org-1")).await;
    let during = inbox.wait_for(1, WAIT).await.remove(0);
    let header = during.header("webhook-signature").to_owned();
    let signatures: Vec<&str> = header.split(' ').collect();
    assert_eq!(
        signatures.len(),
        2,
        "two signatures, space separated: {header}"
    );
    assert!(signatures.iter().all(|s| s.starts_with("v1,")), "{header}");
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
        "the header verifies with either key; the first signature is the new key's, the second the old key's"
    );
    // The grace period passes on the server's clock.
    server.advance_clock(grace + Duration::from_secs(1));
    post_event(&server, "org-1", event("evt-after", "org-1")).await;
    let after = inbox.wait_for(2, WAIT).await.remove(1);
    let header = after.header("webhook-signature");
    assert_eq!(
        header.split(' ').count(),
        1,
        "only the new key signs: {header}"
    );
    assert_eq!(
        verify(&after, &[whole(&new), whole(&old)]),
        [true, false],
        "after the grace period the old key no longer verifies"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_rules_limits_and_errors() {
    let server = Server::start();
    let inbox = Receiver::start(Handshake::Echo).await;
    let (id, first) = subscribe(&server, "org-1", &inbox.uri("/rules")).await;
    let path = format!("/webhooksubscription/{id}/secret/rotate");

    // A key of the client's own, and no body at all (the defaults).
    let own = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    let (status, body) = rotate(&server, "org-1", &id, Some(json!({"key": own}))).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"key": own})));
    let (status, body) = rotate(&server, "org-1", &id, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_ne!(body["key"], own);

    // Bad input: 400 with the field, never the key echoed.
    for (input, field) in [
        (json!({"key": "whsec_c2hvcnQ="}), "key"),
        (json!({"key": "not-a-secret-at-all-but-long-enough"}), "key"),
        (
            json!({"key": format!("whsec_{}", "QUFB".repeat(22))}),
            "key",
        ),
        (json!({"key": own}), "key"), // still in its grace period
        (json!({"key": first}), "key"),
        (json!({"gracePeriodSeconds": -1}), "gracePeriodSeconds"),
        (json!({"gracePeriodSeconds": 604_801}), "gracePeriodSeconds"),
        (json!({"gracePeriodSeconds": 1.5}), "gracePeriodSeconds"),
        (json!({"gracePeriodSeconds": "60"}), "gracePeriodSeconds"),
    ] {
        let (status, body) = rotate(&server, "org-1", &id, Some(input.clone())).await;
        assert_invalid(status, &body, field, &input.to_string());
        if let Some(key) = input["key"].as_str() {
            assert!(!body.to_string().contains(key), "{body}");
        }
    }
    let (status, body) = send(
        server
            .req(Method::POST, &path, "org-1")
            .header("content-type", "application/json")
            .body("{\"key\":"),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("MALFORMED_JSON"))
    );
    let (status, body) = send(
        server
            .req(Method::POST, &path, "org-1")
            .header("content-type", "text/plain")
            .body("{}"),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Some("UNSUPPORTED_MEDIA_TYPE")
        )
    );

    // Tenancy and scope: another organization's subscription does not
    // exist for it; a read-only token may not rotate.
    let before = current_key(&server, "org-1", &id).await;
    let (status, body) = rotate(&server, "org-2", &id, None).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("SUBSCRIPTION_NOT_FOUND"))
    );
    let (missing_status, missing) = rotate(&server, "org-2", "no-such-id", None).await;
    assert_eq!(missing_status, StatusCode::NOT_FOUND);
    assert_eq!(
        body["detail"].as_str().unwrap().replace(&id, "X"),
        missing["detail"]
            .as_str()
            .unwrap()
            .replace("no-such-id", "X"),
        "another organization's subscription answers as a missing one"
    );
    let (status, body) = send(
        server
            .http
            .post(server.url(&path))
            .header("x-api-key", &server.key)
            .bearer_auth(server.token_with("org-1", &["webhooks/read"])),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("INSUFFICIENT_SCOPE"))
    );
    assert_eq!(
        current_key(&server, "org-1", &id).await,
        before,
        "nothing changed"
    );

    // Two rotations so far kept two old keys; eight more reach the limit of ten.
    for _ in 0..8 {
        let (status, body) = rotate(&server, "org-1", &id, Some(json!({}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let before = current_key(&server, "org-1", &id).await;
    let (status, body) = rotate(&server, "org-1", &id, None).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::CONFLICT, Some("SECRET_ROTATION_LIMIT_REACHED")),
        "{body}"
    );
    assert_eq!(
        current_key(&server, "org-1", &id).await,
        before,
        "a refused rotation changes nothing"
    );
    // Without a grace period the replaced key is not kept: allowed.
    let (status, body) = rotate(
        &server,
        "org-1",
        &id,
        Some(json!({"gracePeriodSeconds": 0})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // A notification now carries the current key's signature and ten old ones.
    post_event(&server, "org-1", event("evt-many", "org-1")).await;
    let got = inbox.wait_for(1, WAIT).await.remove(0);
    assert_eq!(got.header("webhook-signature").split(' ').count(), 11);
    let current = body["key"].as_str().unwrap().to_owned();
    assert_eq!(
        verify(&got, &[whole(&current), whole(&first), whole(&before)]),
        [true, true, false],
        "the first key is still in its grace period; the key replaced without one is not"
    );
}

/// `webhooks-local listen` with the old and the new key: it accepts a
/// notification signed with both and says which keys verified it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_takes_several_secrets_and_says_which_verified() {
    let server = Server::start();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = |secrets: &[&str]| {
        let mut cmd = Command::new(BIN);
        cmd.args(["listen", "--port", &port.to_string()]);
        for secret in secrets {
            cmd.args(["--secret", secret]);
        }
        let mut child = cmd
            .env_remove("WEBHOOKS_LISTEN_SECRET")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut banner = String::new();
        stderr.read_line(&mut banner).unwrap();
        assert!(banner.contains("receiving callbacks"), "{banner}");
        (child, stderr)
    };
    let (mut first, _stderr) = listen(&[]);
    let (status, sub) = server
        .create(
            "org-1",
            &format!("http://127.0.0.1:{port}/hook"),
            &[&contact("org-1", "d")],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    first.kill().unwrap();
    first.wait().unwrap();
    let id = sub["id"].as_str().unwrap();
    let old = current_key(&server, "org-1", id).await;
    let (_, body) = rotate(&server, "org-1", id, None).await;
    let new = body["key"].as_str().unwrap().to_owned();
    // A key unrelated to the subscription, first: it does not verify.
    let stranger = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

    let (mut listener, mut stderr) = listen(&[stranger, &old, &new]);
    post_event(&server, "org-1", event("evt-listen", "org-1")).await;
    let mut verdict = String::new();
    stderr.read_line(&mut verdict).unwrap();
    listener.kill().unwrap();
    listener.wait().unwrap();
    assert!(
        verdict.contains("signature verified with key 2, key 3 (of 3)"),
        "{verdict}"
    );
    assert!(
        !verdict.contains("whsec_"),
        "no secret is printed: {verdict}"
    );
}
