//! OAuth 2.0 access tokens from an identity provider, end to end: RS256 and
//! ES256 tokens shaped like Cognito's (`token_use`, `client_id`, `scope`),
//! verified by the real binary against a JWKS served on loopback; key
//! rotation; and the scope matrix over every endpoint.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use common::*;
use http::StatusCode;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::Method;
use serde_json::{json, Value};

const RSA: &[u8] = include_bytes!("../../../shared/tests/keys/rsa_private.der");
const RSA2: &[u8] = include_bytes!("../../../shared/tests/keys/rsa2_private.der");
const EC: &[u8] = include_bytes!("../../../shared/tests/keys/ec_private.der");
const ISSUER: &str = "https://idp.test/pool-1";
const CLIENT: &str = "client-1";

fn key(alg: Algorithm) -> (EncodingKey, &'static str) {
    match alg {
        Algorithm::RS256 => (EncodingKey::from_rsa_der(RSA), "rsa-1"),
        Algorithm::ES256 => (EncodingKey::from_ec_der(EC), "ec-1"),
        _ => unreachable!(),
    }
}

fn jwk(key: &EncodingKey, alg: Algorithm, kid: &str) -> Jwk {
    let mut jwk = Jwk::from_encoding_key(key, alg).unwrap();
    jwk.common.key_id = Some(kid.to_owned());
    jwk
}

/// A JWKS endpoint whose key set can be swapped (rotation), counting fetches.
#[derive(Clone)]
struct Jwks {
    set: Arc<Mutex<JwkSet>>,
    fetches: Arc<AtomicUsize>,
    url: String,
}

async fn serve(State(j): State<Jwks>) -> axum::response::Response {
    j.fetches.fetch_add(1, Ordering::SeqCst);
    let body = serde_json::to_string(&*j.set.lock().unwrap()).unwrap();
    axum::response::Response::builder()
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body))
        .unwrap()
}

impl Jwks {
    async fn start() -> Jwks {
        let (rsa, rsa_kid) = key(Algorithm::RS256);
        let (ec, ec_kid) = key(Algorithm::ES256);
        let set = JwkSet {
            keys: vec![
                jwk(&rsa, Algorithm::RS256, rsa_kid),
                jwk(&ec, Algorithm::ES256, ec_kid),
            ],
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/.well-known/jwks.json",
            listener.local_addr().unwrap()
        );
        let j = Jwks {
            set: Arc::new(Mutex::new(set)),
            fetches: Arc::default(),
            url,
        };
        let app = axum::Router::new().fallback(serve).with_state(j.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        j
    }
}

fn server(jwks: &Jwks) -> Server {
    Server::start_with(&[
        ("WEBHOOKS_JWT_JWKS_URL", &jwks.url),
        ("WEBHOOKS_JWT_ISSUER", ISSUER),
        ("WEBHOOKS_JWT_AUDIENCE", CLIENT),
        ("WEBHOOKS_JWT_JWKS_MIN_REFRESH", "200ms"),
    ])
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A Cognito-shaped access token.
fn access(scope: &str) -> Value {
    json!({"sub": "user-1", "token_use": "access", "client_id": CLIENT, "scope": scope,
           "org_id": "org-1", "iss": ISSUER, "iat": now(), "exp": now() + 600})
}

fn sign(claims: &Value, alg: Algorithm, kid: &str, key: &EncodingKey) -> String {
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

fn signed(claims: &Value, alg: Algorithm) -> String {
    let (k, kid) = key(alg);
    sign(claims, alg, kid, &k)
}

async fn list_with(server: &Server, token: &str) -> (StatusCode, Value, String) {
    let resp = server
        .http
        .get(server.url("/webhooksubscription/all"))
        .header("x-api-key", &server.key)
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap();
    let www = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = resp.json().await.unwrap_or(Value::Null);
    (status, body, www)
}

#[tokio::test]
async fn rs256_and_es256_access_tokens_from_a_jwks() {
    let jwks = Jwks::start().await;
    let server = server(&jwks);
    let rw = access("openid webhooks/read webhooks/write");
    for alg in [Algorithm::RS256, Algorithm::ES256] {
        let (status, body, _) = list_with(&server, &signed(&rw, alg)).await;
        assert_eq!(status, StatusCode::OK, "{alg:?}: {body}");
    }
    let mut refused: Vec<(&str, String)> = Vec::new();
    let (rsa, _) = key(Algorithm::RS256);
    refused.push(("unknown kid", sign(&rw, Algorithm::RS256, "nope", &rsa)));
    refused.push((
        "kid of the other algorithm",
        sign(&rw, Algorithm::RS256, "ec-1", &rsa),
    ));
    let mut c = rw.clone();
    c["iss"] = json!("https://evil.test/pool-1");
    refused.push(("wrong issuer", signed(&c, Algorithm::RS256)));
    let mut c = rw.clone();
    c["client_id"] = json!("another-client");
    refused.push(("wrong audience (client_id)", signed(&c, Algorithm::ES256)));
    let mut c = rw.clone();
    c["token_use"] = json!("id");
    c["aud"] = json!(CLIENT);
    refused.push(("an ID token", signed(&c, Algorithm::RS256)));
    let mut c = rw.clone();
    c["exp"] = json!(now() - 120);
    refused.push(("expired", signed(&c, Algorithm::ES256)));
    let mut c = rw.clone();
    c["nbf"] = json!(now() + 600);
    refused.push(("not yet valid", signed(&c, Algorithm::RS256)));
    for (why, token) in refused {
        let (status, body, www) = list_with(&server, &token).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (StatusCode::UNAUTHORIZED, Some("INVALID_TOKEN")),
            "{why}: {body}"
        );
        assert_eq!(www, "Bearer error=\"invalid_token\"", "{why}");
    }
    // A valid token of a user without an organization.
    let mut c = rw.clone();
    c.as_object_mut().unwrap().remove("org_id");
    let (status, body, _) = list_with(&server, &signed(&c, Algorithm::RS256)).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("ORG_CLAIM_MISSING"))
    );
}

#[tokio::test]
async fn a_rotated_key_is_picked_up_and_the_old_one_dropped() {
    let jwks = Jwks::start().await;
    let server = server(&jwks);
    let rw = access("webhooks/read webhooks/write");
    assert_eq!(
        list_with(&server, &signed(&rw, Algorithm::RS256)).await.0,
        StatusCode::OK
    );
    // The provider rotates: rsa-2 replaces rsa-1.
    let rsa2 = EncodingKey::from_rsa_der(RSA2);
    *jwks.set.lock().unwrap() = JwkSet {
        keys: vec![jwk(&rsa2, Algorithm::RS256, "rsa-2")],
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (status, body, _) = list_with(&server, &sign(&rw, Algorithm::RS256, "rsa-2", &rsa2)).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the new key is fetched on its first use: {body}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (status, _, _) = list_with(&server, &signed(&rw, Algorithm::RS256)).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "the retired key no longer verifies"
    );
    // A burst of unknown kids does not turn into a burst of fetches.
    let before = jwks.fetches.load(Ordering::SeqCst);
    for i in 0..20 {
        let (status, _, _) = list_with(
            &server,
            &sign(&rw, Algorithm::RS256, &format!("forged-{i}"), &rsa2),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let during = jwks.fetches.load(Ordering::SeqCst) - before;
    assert!(during <= 3, "{during} JWKS fetches for 20 unknown kids");
}

/// Every endpoint (`Endpoint::ALL`: a new one fails here until it has a
/// request), with a request to it and the scope it needs.
fn endpoints(id: &str) -> Vec<(Method, String, Option<Value>, &'static str)> {
    use webhook_core::routes::Endpoint;
    let uuid = "00000000-0000-5000-8000-000000000001";
    Endpoint::ALL
        .into_iter()
        .map(|endpoint| {
            let (path, body) = match endpoint {
                Endpoint::CreateSubscription => (
                    "/webhooksubscription".to_owned(),
                    Some(json!({"uri": "http://127.0.0.1:9/x",
                                "eventFilters": [inbound("org-1", "d")]})),
                ),
                Endpoint::ListSubscriptions => ("/webhooksubscription/all".into(), None),
                Endpoint::GetSubscription | Endpoint::DeleteSubscription => {
                    (format!("/webhooksubscription/{id}"), None)
                }
                Endpoint::GetSubscriptionSecret => {
                    (format!("/webhooksubscription/{id}/secret"), None)
                }
                Endpoint::RotateSubscriptionSecret => (
                    format!("/webhooksubscription/{id}/secret/rotate"),
                    Some(json!({})),
                ),
                Endpoint::GetMessage => ("/message/getmessagebyid/msg-1".into(), None),
                Endpoint::ListNotifications => {
                    (format!("/webhooksubscription/{id}/notifications"), None)
                }
                Endpoint::GetNotification => (
                    format!("/webhooksubscription/{id}/notifications/{uuid}"),
                    None,
                ),
                Endpoint::ResendNotification => (
                    format!("/webhooksubscription/{id}/notifications/{uuid}/resend"),
                    None,
                ),
                Endpoint::RecoverNotifications => (
                    format!("/webhooksubscription/{id}/recover"),
                    Some(json!({"since": 0})),
                ),
                Endpoint::GetDeliveryStats => (format!("/webhooksubscription/{id}/stats"), None),
                Endpoint::GetDestinationIdentity => {
                    ("/webhooksubscription/destination-identity".into(), None)
                }
                Endpoint::ListEventTypes => ("/event-types".into(), None),
                Endpoint::GetEventType => ("/event-types/message.inbound".into(), None),
                Endpoint::IngestEvent => (
                    "/events".into(),
                    Some(json!({"type": "contact.created", "organizationId": "org-1",
                                "departmentId": "d", "contact": {"id": "c"}})),
                ),
            };
            let method = endpoint.method();
            let needed = if method == Method::GET {
                "webhooks/read"
            } else {
                "webhooks/write"
            };
            (method, path, body, needed)
        })
        .collect()
}

#[tokio::test]
async fn every_endpoint_needs_its_scope() {
    let jwks = Jwks::start().await;
    let server = server(&jwks);
    let id = "00000000-0000-4000-8000-000000000001";
    for scopes in [
        "",
        "openid",
        "webhooks/read",
        "webhooks/write",
        "webhooks/read webhooks/write",
    ] {
        let token = signed(&access(scopes), Algorithm::ES256);
        for (method, path, body, needed) in endpoints(id) {
            let mut req = server
                .http
                .request(method.clone(), server.url(&path))
                .header("x-api-key", &server.key)
                .bearer_auth(&token);
            if let Some(b) = &body {
                req = req.json(b);
            }
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let www = resp
                .headers()
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap().to_owned());
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            let allowed = scopes.split_whitespace().any(|s| s == needed);
            if allowed {
                assert_ne!(
                    body["code"], "INSUFFICIENT_SCOPE",
                    "{method} {path} with '{scopes}'"
                );
                assert!(status < 500, "{method} {path}: {status}");
            } else {
                assert_eq!(
                    (status, body["code"].as_str()),
                    (403, Some("INSUFFICIENT_SCOPE")),
                    "{method} {path} with '{scopes}'"
                );
                let www = www.expect("WWW-Authenticate on 403 insufficient_scope");
                assert!(
                    www.contains("error=\"insufficient_scope\"") && www.contains(needed),
                    "{www}"
                );
            }
        }
    }
}

#[tokio::test]
async fn the_token_command_mints_tokens_with_the_scopes_asked_for() {
    let server = Server::start();
    let out = std::process::Command::new(BIN)
        .args([
            "token",
            "--org",
            "org-1",
            "--scope",
            "webhooks/read",
            "--data-dir",
        ])
        .arg(server.dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let get = send(
        server
            .http
            .get(server.url("/webhooksubscription/all"))
            .header("x-api-key", &server.key)
            .bearer_auth(&token),
    )
    .await;
    assert_eq!(get.0, StatusCode::OK);
    let post = send(
        server
            .http
            .post(server.url("/webhooksubscription"))
            .header("x-api-key", &server.key)
            .bearer_auth(&token)
            .json(&json!({"uri": "http://127.0.0.1:9/x", "eventFilters": [inbound("org-1", "d")]})),
    )
    .await;
    assert_eq!(
        (post.0, post.1["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("INSUFFICIENT_SCOPE"))
    );
}

/// A client-credentials token of an identity provider with its own scope
/// names (a backend integration's token, shaped like Cognito's: `sub` is
/// the client id, no user): accepted only when `WEBHOOKS_READ_SCOPES` /
/// `WEBHOOKS_WRITE_SCOPES` name those scopes, and then the default names
/// are not enough.
#[tokio::test]
async fn a_providers_own_scope_names_work_only_when_configured() {
    const READ: &str = "https://com.beetexting.scopes/ReadContact";
    const WRITE: &str = "https://com.beetexting.scopes/WriteContact";
    let jwks = Jwks::start().await;
    let machine = |scope: &str| {
        signed(
            &json!({"sub": CLIENT, "token_use": "access", "client_id": CLIENT, "scope": scope,
                    "org_id": "org-1", "iss": ISSUER, "iat": now(), "exp": now() + 600}),
            Algorithm::RS256,
        )
    };
    let env = [
        ("WEBHOOKS_JWT_JWKS_URL", jwks.url.as_str()),
        ("WEBHOOKS_JWT_ISSUER", ISSUER),
        ("WEBHOOKS_JWT_AUDIENCE", CLIENT),
    ];
    let default = Server::start_with(&env);
    let (status, body, _) = list_with(&default, &machine(&format!("{READ} {WRITE}"))).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("INSUFFICIENT_SCOPE"))
    );

    let mut custom_env = env.to_vec();
    custom_env.extend([
        ("WEBHOOKS_READ_SCOPES", READ),
        ("WEBHOOKS_WRITE_SCOPES", WRITE),
    ]);
    let custom = Server::start_with(&custom_env);
    let (status, body, _) = list_with(&custom, &machine(READ)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body, www) = list_with(&custom, &machine("webhooks/read webhooks/write")).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("INSUFFICIENT_SCOPE"))
    );
    assert_eq!(
        www,
        format!("Bearer error=\"insufficient_scope\", scope=\"{READ}\"")
    );
    // Writing needs the write scope: a read-only token may not delete.
    let delete = |token: String| {
        custom
            .http
            .delete(custom.url("/webhooksubscription/some-id"))
            .header("x-api-key", &custom.key)
            .bearer_auth(token)
            .send()
    };
    assert_eq!(delete(machine(READ)).await.unwrap().status().as_u16(), 403);
    assert_eq!(delete(machine(WRITE)).await.unwrap().status().as_u16(), 404);
}
