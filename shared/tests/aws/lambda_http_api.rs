//! The HTTP API option (`ApiType=http`): the `authorizer` given the HTTP
//! API's events (payload format 2.0, `events/authorizer-http-*.json`), with
//! API keys created and revoked in DynamoDB Local as `webhooks-local
//! api-keys` does, and a function given the authorizer's context behind it
//! (`events/get-subscription-http-*.json`).

use testkit::dynamodb_local;

use testkit::sample_events;

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::apigw::{
    ApiGatewayV2CustomAuthorizerSimpleResponse, ApiGatewayV2CustomAuthorizerV2Request,
};
use http::StatusCode;
use lambda_http::Body;
use serde_json::{json, Value};
use webhook_core::auth::jwt::{mint_hs256, Verifier, ALL_SCOPES};
use webhook_core::aws::dynamodb::api_keys::Revoked;
use webhook_core::aws::dynamodb::DynamoStore;
use webhook_core::clock::{Clock, SystemClock};
use webhook_core::config::JwtConfig;
use webhook_core::lambda::{self, authorizer, Endpoint};
use webhook_core::store::{Store, Upsert};
use webhook_core::{App, Config, Profile};

const JWT_SECRET: &str = "test-hs256-secret";
const SUBSCRIPTION_ID: &str = "00000000-0000-4000-8000-000000000001";

fn verifier() -> Verifier {
    Verifier::new(&JwtConfig {
        hs256_secret: Some(JWT_SECRET.into()),
        jwks_url: None,
        issuer: None,
        audience: None,
        org_claim: "org_id".into(),
        scopes: Default::default(),
    })
}

fn token(org: &str) -> String {
    mint_hs256(
        JWT_SECRET,
        "org_id",
        org,
        &ALL_SCOPES,
        Duration::from_secs(300),
    )
}

async fn store() -> DynamoStore {
    let (client, tables) = dynamodb_local::fresh_tables("http-api").await;
    DynamoStore::new(client, tables)
}

/// `events/<name>.json` with its placeholders replaced.
fn event(name: &str, token: &str, key: &str) -> Value {
    let text = sample_events::text(name)
        .replace("TOKEN_PLACEHOLDER", token)
        .replace("API_KEY_PLACEHOLDER", key);
    serde_json::from_str(&text).unwrap()
}

/// The authorizer's JSON answer to `events/<name>.json`, through the same
/// entry point the Lambda's `main.rs` runs (it tells the APIs apart).
async fn authorize(keys: &DynamoStore, name: &str, token: &str, key: &str) -> Value {
    let authorizer = authorizer::Authorizer::with_keys(verifier(), keys.clone());
    let event = event(name, token, key);
    let http_api = event["version"] == "2.0";
    if http_api {
        // The sample is what the typed HTTP API request reads.
        serde_json::from_value::<ApiGatewayV2CustomAuthorizerV2Request>(event.clone())
            .expect("an HTTP API authorizer event");
    }
    let answer = authorizer::handle(
        &authorizer,
        lambda_runtime::LambdaEvent::new(event, lambda_runtime::Context::default()),
    )
    .await
    .expect("the authorizer answers");
    if http_api {
        serde_json::from_value::<ApiGatewayV2CustomAuthorizerSimpleResponse>(answer.clone())
            .expect("a simple response");
    }
    answer
}

/// The refusal an answer carries: (status, code).
fn refusal(answer: &Value) -> (u64, &str) {
    assert_eq!(answer["isAuthorized"], true, "{answer}");
    assert!(answer["context"].get("orgId").is_none(), "{answer}");
    (
        answer["context"]["status"].as_u64().unwrap(),
        answer["context"]["refusal"].as_str().unwrap(),
    )
}

#[tokio::test]
async fn a_valid_key_and_token_of_one_organization_are_allowed() {
    let keys = store().await;
    let key = keys.create_api_key(&"org-1".into(), now()).await.unwrap();
    let answer = authorize(&keys, "authorizer-http-request", &token("org-1"), &key.key).await;
    assert_eq!(
        answer,
        json!({
            "isAuthorized": true,
            "context": {"orgId": "org-1", "sub": "local:org-1", "scope": "webhooks/read webhooks/write"}
        })
    );
}

#[tokio::test]
async fn a_missing_unknown_or_forged_key_is_refused() {
    let keys = store().await;
    let key = keys.create_api_key(&"org-1".into(), now()).await.unwrap();
    let token = token("org-1");
    let answer = authorize(&keys, "authorizer-http-request-no-key", &token, "").await;
    assert_eq!(refusal(&answer), (403, "API_KEY_MISSING"));
    // Same id, another secret: the digest differs.
    let (id_part, secret) = key.key.split_once('.').unwrap();
    let mut forged_secret = secret.to_owned().into_bytes();
    forged_secret[0] = if forged_secret[0] == b'A' { b'B' } else { b'A' };
    let forged = format!("{id_part}.{}", String::from_utf8(forged_secret).unwrap());
    let unknown = webhook_core::auth::tenant_key::generate().key;
    for (what, presented) in [
        ("not a key", "test-api-key"),
        ("unknown id", unknown.as_str()),
        ("forged secret", forged.as_str()),
    ] {
        let answer = authorize(&keys, "authorizer-http-request", &token, presented).await;
        assert_eq!(refusal(&answer), (403, "API_KEY_INVALID"), "{what}");
    }
}

#[tokio::test]
async fn a_revoked_key_is_refused() {
    let keys = store().await;
    let key = keys.create_api_key(&"org-1".into(), now()).await.unwrap();
    let token = token("org-1");
    let before = authorize(&keys, "authorizer-http-request", &token, &key.key).await;
    assert_eq!(before["context"]["orgId"], "org-1");
    assert_eq!(
        keys.revoke_api_key(&key.id, now()).await.unwrap(),
        Revoked::Now
    );
    let after = authorize(&keys, "authorizer-http-request", &token, &key.key).await;
    assert_eq!(refusal(&after), (403, "API_KEY_INVALID"));
    assert_eq!(after["context"]["detail"], "the API key has been revoked");
    assert_eq!(
        keys.revoke_api_key(&key.id, now()).await.unwrap(),
        Revoked::Already
    );
    let unknown = webhook_core::auth::tenant_key::generate();
    assert_eq!(
        keys.revoke_api_key(&unknown.id, now()).await.unwrap(),
        Revoked::NoSuchKey
    );
}

#[tokio::test]
async fn a_key_of_another_organization_is_refused() {
    let keys = store().await;
    let key = keys.create_api_key(&"org-1".into(), now()).await.unwrap();
    let answer = authorize(&keys, "authorizer-http-request", &token("org-2"), &key.key).await;
    assert_eq!(refusal(&answer), (403, "ORGANIZATION_MISMATCH"));
}

#[tokio::test]
async fn a_bad_token_with_a_valid_key_is_refused() {
    let keys = store().await;
    let key = keys.create_api_key(&"org-1".into(), now()).await.unwrap();
    let wrong_key = mint_hs256(
        "another-secret",
        "org_id",
        "org-1",
        &ALL_SCOPES,
        Duration::from_secs(300),
    );
    for (what, token) in [
        ("placeholder", "TOKEN_PLACEHOLDER"),
        ("garbage", "not.a.jwt"),
        ("wrong key", wrong_key.as_str()),
    ] {
        let answer = authorize(&keys, "authorizer-http-request", token, &key.key).await;
        assert_eq!(refusal(&answer), (401, "INVALID_TOKEN"), "{what}");
    }
    let no_org = mint_hs256(
        JWT_SECRET,
        "tenant",
        "org-1",
        &ALL_SCOPES,
        Duration::from_secs(300),
    );
    let answer = authorize(&keys, "authorizer-http-request", &no_org, &key.key).await;
    assert_eq!(refusal(&answer), (403, "ORG_CLAIM_MISSING"));
    let no_scope = mint_hs256(JWT_SECRET, "org_id", "org-1", &[], Duration::from_secs(300));
    let answer = authorize(&keys, "authorizer-http-request", &no_scope, &key.key).await;
    assert_eq!(refusal(&answer), (403, "INSUFFICIENT_SCOPE"));
}

/// The REST API's events still get the REST answer from the same entry point.
#[tokio::test]
async fn the_rest_api_event_still_gets_a_policy() {
    let keys = store().await;
    let answer = authorize(&keys, "authorizer-request", &token("org-1"), "").await;
    assert_eq!(answer["policyDocument"]["Statement"][0]["Effect"], "Allow");
    assert_eq!(answer["context"]["orgId"], "org-1");
}

#[tokio::test]
async fn a_function_behind_the_http_api_serves_the_caller_or_answers_the_refusal() {
    let store = Arc::new(store().await);
    let now = now();
    store
        .upsert_subscription(Upsert {
            org_id: "org-1".into(),
            uri: "https://example.com/s".into(),
            event_filters: vec!["/orgId/org-1/department/dep-1/message?direction=inbound".into()],
            disabled_filters: vec![],
            expires_at: now + 86_400_000,
            now,
            new_id: SUBSCRIPTION_ID.into(),
            new_secret: "whsec_c2VlZGVkLXNlY3JldC1mb3ItdGVzdHM=".into(),
            max_per_org: 1000,
            ordered: None,
            rate_limit: None,
            role_arn: None,
            external_id: None,
            payload_filter: None,
            retry_schedule: None,
            custom_headers: None,
        })
        .await
        .unwrap();
    let config = Config::from_lookup(Profile::Lambda, |_| None).unwrap();
    let app = App::new(config, store);
    let invoke = |name: &'static str| {
        let app = &app;
        async move {
            let request = lambda_http::request::from_str(&sample_events::text(name))
                .unwrap_or_else(|e| panic!("events/{name}.json is not an HTTP API event: {e}"));
            let response = lambda::handle(app, Endpoint::GetSubscription, request)
                .await
                .unwrap();
            let status = response.status();
            let content_type = response.headers().get("content-type").cloned();
            let Body::Text(text) = response.body() else {
                panic!("a text body")
            };
            let body: Value = serde_json::from_str(text).unwrap();
            (status, content_type, body)
        }
    };
    let (status, _, body) = invoke("get-subscription-http-ok").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["id"], SUBSCRIPTION_ID);
    let (status, content_type, body) = invoke("get-subscription-http-refused").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        content_type.unwrap().to_str().unwrap(),
        "application/problem+json"
    );
    assert_eq!(body["code"], "API_KEY_INVALID");
    assert_eq!(body["status"], 403);
    assert_eq!(body["detail"], "the API key has been revoked");
}

fn now() -> i64 {
    SystemClock.now_ms()
}
