//! Every sample event in `events/`, fed to exactly the handler functions the
//! Lambda `main.rs` files call (`lambda::handle`, `authorizer::authorize`),
//! against DynamoDB Local with fresh tables per test.

mod dynamodb_local;

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::apigw::ApiGatewayCustomAuthorizerRequestTypeRequest;
use aws_lambda_events::iam::IamPolicyEffect;
use http::StatusCode;
use lambda_http::{Body, Response};
use serde_json::{json, Value};
use webhook_core::auth::jwt::{mint_hs256, Verifier, ALL_SCOPES};
use webhook_core::aws::dynamodb::DynamoStore;
use webhook_core::clock::{Clock, SystemClock};
use webhook_core::config::JwtConfig;
use webhook_core::ids::{OrgId, SubscriptionId};
use webhook_core::lambda::{self, authorizer, Endpoint};
use webhook_core::model::Message;
use webhook_core::store::{Store, Upsert};
use webhook_core::{App, Config, Profile};

const SUBSCRIPTION_ID: &str = "00000000-0000-4000-8000-000000000001";
const JWT_SECRET: &str = "test-hs256-secret";

fn event_text(name: &str) -> String {
    let path = format!("{}/../events/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn request(name: &str) -> lambda_http::Request {
    lambda_http::request::from_str(&event_text(name))
        .unwrap_or_else(|e| panic!("events/{name}.json is not an API Gateway event: {e}"))
}

/// The deployed configuration, plus http and loopback callbacks so the
/// handshake can reach a receiver on this machine.
async fn app() -> (App, Arc<DynamoStore>) {
    let config = Config::from_lookup(Profile::Lambda, |var| match var {
        "WEBHOOKS_ALLOW_HTTP_CALLBACKS" | "WEBHOOKS_ALLOW_PRIVATE_CALLBACKS" => Some("true".into()),
        "WEBHOOKS_HANDSHAKE_TIMEOUT_MS" => Some("3000".into()),
        _ => None,
    })
    .unwrap();
    let (client, tables) = dynamodb_local::fresh_tables("events").await;
    let store = Arc::new(DynamoStore::new(client, tables));
    (App::new(config, store.clone()), store)
}

async fn invoke(app: &App, endpoint: Endpoint, event: &str) -> (StatusCode, Value) {
    let response = lambda::handle(app, endpoint, request(event))
        .await
        .expect("the handler never fails");
    split(response)
}

/// Invokes `endpoint` with `event` and asserts the problem's status and code.
async fn expect_problem(
    app: &App,
    endpoint: Endpoint,
    event: &str,
    status: StatusCode,
    code: &str,
) {
    let (got, body) = invoke(app, endpoint, event).await;
    assert_eq!(
        (got, body["code"].as_str()),
        (status, Some(code)),
        "{event}: {body}"
    );
}

/// Status and JSON body; checks every error is problem+json with its status.
fn split(response: Response<Body>) -> (StatusCode, Value) {
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = match response.body() {
        Body::Empty => Value::Null,
        Body::Text(text) => serde_json::from_str(text).expect("a JSON body"),
        Body::Binary(_) => panic!("API Gateway REST needs text bodies"),
        _ => panic!("unexpected body kind"),
    };
    if !status.is_success() {
        assert_eq!(content_type.as_deref(), Some("application/problem+json"));
        assert_eq!(body["status"], status.as_u16(), "{body}");
    }
    (status, body)
}

async fn seed(store: &DynamoStore, org: &str, id: &str, uri: &str, now: i64) {
    let filter = format!("/orgId/{org}/department/dep-1/message?direction=inbound");
    store
        .upsert_subscription(Upsert {
            org_id: org.into(),
            uri: uri.into(),
            event_filters: vec![filter],
            disabled_filters: vec![],
            expires_at: now + 86_400_000,
            now,
            new_id: id.into(),
            new_secret: "whsec_c2VlZGVkLXNlY3JldC1mb3ItdGVzdHM=".into(),
            max_per_org: 1000,
        })
        .await
        .unwrap();
}

fn now() -> i64 {
    SystemClock.now_ms()
}

/// A callback receiver on loopback that echoes the validation token.
async fn receiver() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = axum::Router::new().fallback(|headers: http::HeaderMap| async move {
        let mut response = http::Response::builder().status(200);
        if let Some(token) = headers.get("validation-token") {
            response = response.header("validation-token", token);
        }
        response.body(axum::body::Body::empty()).unwrap()
    });
    let task = tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    (format!("http://{addr}/hook"), task)
}

#[tokio::test]
async fn create_subscription_ok() {
    let (app, store) = app().await;
    let (uri, _server) = receiver().await;
    let mut event: Value = serde_json::from_str(&event_text("create-subscription-ok")).unwrap();
    let body = event["body"]
        .as_str()
        .unwrap()
        .replace("http://127.0.0.1:9/hook", &uri);
    event["body"] = Value::from(body);
    let request = lambda_http::request::from_str(&event.to_string()).unwrap();
    let response = lambda::handle(&app, Endpoint::CreateSubscription, request)
        .await
        .unwrap();
    let (status, body) = split(response);
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ACTIVE");
    assert_eq!(body["uri"], uri);
    assert_eq!(body["orgId"], "org-1");
    assert_eq!(
        body["eventFilters"],
        json!(["/orgId/org-1/department/dep-1/message?direction=inbound"])
    );
    assert_eq!(body["disabledFilters"], json!([]));
    let stored = store
        .list_subscriptions(&OrgId::from("org-1"))
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].id, body["id"].as_str().unwrap());
    let fan_out = store
        .subscriptions_for_filter("/orgId/org-1/department/dep-1/message?direction=inbound")
        .await
        .unwrap();
    assert_eq!(fan_out.len(), 1);
}

#[tokio::test]
async fn create_subscription_errors() {
    let (app, store) = app().await;
    for (event, status, code) in [
        (
            "create-subscription-foreign-filter-only",
            StatusCode::FORBIDDEN,
            "NO_ENABLED_FILTERS",
        ),
        (
            "create-subscription-invalid-filter",
            StatusCode::BAD_REQUEST,
            "VALIDATION_FAILED",
        ),
        (
            "create-subscription-malformed-json",
            StatusCode::BAD_REQUEST,
            "MALFORMED_JSON",
        ),
        (
            "create-subscription-wrong-content-type",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UNSUPPORTED_MEDIA_TYPE",
        ),
    ] {
        expect_problem(&app, Endpoint::CreateSubscription, event, status, code).await;
    }
    assert!(store
        .list_subscriptions(&OrgId::from("org-1"))
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn create_subscription_with_the_deployed_policy_refuses_loopback_callbacks() {
    let (_, store) = app().await;
    let deployed = App::new(
        Config::from_lookup(Profile::Lambda, |_| None).unwrap(),
        store,
    );
    let (status, body) = invoke(
        &deployed,
        Endpoint::CreateSubscription,
        "create-subscription-ok",
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        matches!(
            body["code"].as_str(),
            Some("VALIDATION_FAILED" | "ADDRESS_FORBIDDEN")
        ),
        "{body}"
    );
}

#[tokio::test]
async fn list_subscriptions() {
    let (app, store) = app().await;
    let t = now();
    seed(
        &store,
        "org-1",
        "00000000-0000-7000-8000-00000000000a",
        "https://example.com/a",
        t,
    )
    .await;
    seed(
        &store,
        "org-1",
        "00000000-0000-7000-8000-00000000000b",
        "https://example.com/b",
        t + 1,
    )
    .await;
    seed(
        &store,
        "org-2",
        "00000000-0000-7000-8000-00000000000c",
        "https://example.com/c",
        t,
    )
    .await;

    let (status, page) = invoke(&app, Endpoint::ListSubscriptions, "list-subscriptions-ok").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["totalElements"], 2, "only org-1's");
    let uris: Vec<&str> = page["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        ["https://example.com/b", "https://example.com/a"],
        "createdDateTime,desc"
    );
    assert_eq!(page["sort"][0]["property"], "createdDateTime");
    assert_eq!(page["sort"][0]["direction"], "DESC");

    let (status, page) = invoke(
        &app,
        Endpoint::ListSubscriptions,
        "list-subscriptions-bare-sort",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["sort"], json!([]));
    assert_eq!(
        page["content"][0]["uri"], "https://example.com/a",
        "creation order"
    );

    expect_problem(
        &app,
        Endpoint::ListSubscriptions,
        "list-subscriptions-bad-size",
        StatusCode::BAD_REQUEST,
        "VALIDATION_FAILED",
    )
    .await;

    expect_problem(
        &app,
        Endpoint::ListSubscriptions,
        "list-subscriptions-no-authorizer",
        StatusCode::UNAUTHORIZED,
        "INVALID_TOKEN",
    )
    .await;
}

#[tokio::test]
async fn get_subscription_and_its_secret() {
    let (app, store) = app().await;
    let (status, body) = invoke(&app, Endpoint::GetSubscription, "get-subscription-ok").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("SUBSCRIPTION_NOT_FOUND")),
        "nothing seeded yet"
    );
    // Another organization's subscription with that id is not found either.
    seed(
        &store,
        "org-2",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    let (status, _) = invoke(&app, Endpoint::GetSubscription, "get-subscription-ok").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    seed(
        &store,
        "org-1",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    let (status, body) = invoke(&app, Endpoint::GetSubscription, "get-subscription-ok").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["id"], SUBSCRIPTION_ID);
    assert_eq!(body["orgId"], "org-1");
    assert_eq!(body["status"], "ACTIVE");

    let (status, body) = invoke(
        &app,
        Endpoint::GetSubscriptionSecret,
        "get-subscription-secret-ok",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"key": "whsec_c2VlZGVkLXNlY3JldC1mb3ItdGVzdHM="})
    );

    expect_problem(
        &app,
        Endpoint::GetSubscription,
        "get-subscription-not-found",
        StatusCode::NOT_FOUND,
        "SUBSCRIPTION_NOT_FOUND",
    )
    .await;
}

#[tokio::test]
async fn delete_subscription() {
    let (app, store) = app().await;
    seed(
        &store,
        "org-1",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    let (status, body) = invoke(&app, Endpoint::DeleteSubscription, "delete-subscription-ok").await;
    assert_eq!((status, body), (StatusCode::NO_CONTENT, Value::Null));
    assert_eq!(
        store
            .get_subscription(
                &OrgId::from("org-1"),
                &SubscriptionId::from(SUBSCRIPTION_ID)
            )
            .await
            .unwrap(),
        None
    );
    expect_problem(
        &app,
        Endpoint::DeleteSubscription,
        "delete-subscription-ok",
        StatusCode::NOT_FOUND,
        "SUBSCRIPTION_NOT_FOUND",
    )
    .await;
    let (status, _) = invoke(
        &app,
        Endpoint::DeleteSubscription,
        "delete-subscription-not-found",
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn get_message() {
    let (app, store) = app().await;
    let message = Message {
        id: "msg-1".into(),
        owner: None,
        time: Some("2024-03-10T18:07:52.534Z".into()),
        direction: "in".into(),
        to: vec!["+15550100".into()],
        from: "".into(),
        text: "hello".into(),
        media: vec![],
        attachments: vec![],
    };
    store
        .put_message(&OrgId::from("org-1"), &message)
        .await
        .unwrap();
    let (status, body) = invoke(&app, Endpoint::GetMessage, "get-message-ok").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, serde_json::to_value(&message).unwrap());
    expect_problem(
        &app,
        Endpoint::GetMessage,
        "get-message-not-found",
        StatusCode::NOT_FOUND,
        "MESSAGE_NOT_FOUND",
    )
    .await;
}

#[tokio::test]
async fn a_function_answers_only_its_own_method() {
    let (app, _) = app().await;
    expect_problem(
        &app,
        Endpoint::DeleteSubscription,
        "get-subscription-ok",
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
    )
    .await;
}

// ---------------------------------------------------------------------------
// Authorizer

fn verifier() -> Verifier {
    Verifier::new(&JwtConfig {
        hs256_secret: Some(JWT_SECRET.into()),
        jwks_url: None,
        issuer: None,
        audience: None,
        org_claim: "org_id".into(),
    })
}

fn authorizer_event(
    name: &str,
    token: Option<&str>,
) -> ApiGatewayCustomAuthorizerRequestTypeRequest {
    let mut text = event_text(name);
    if let Some(token) = token {
        text = text.replace("TOKEN_PLACEHOLDER", token);
    }
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("events/{name}.json is not an authorizer event: {e}"))
}

async fn authorize(
    event: ApiGatewayCustomAuthorizerRequestTypeRequest,
) -> Result<aws_lambda_events::apigw::ApiGatewayCustomAuthorizerResponse, String> {
    authorizer::authorize(
        &verifier(),
        lambda_runtime::LambdaEvent::new(event, lambda_runtime::Context::default()),
    )
    .await
    .map_err(|e| e.to_string())
}

#[tokio::test]
async fn authorizer_allows_a_valid_token_for_the_whole_stage() {
    let token = mint_hs256(
        JWT_SECRET,
        "org_id",
        "org-1",
        &ALL_SCOPES,
        Duration::from_secs(300),
    );
    let response = authorize(authorizer_event("authorizer-request", Some(&token)))
        .await
        .unwrap();
    let statement = &response.policy_document.statement[0];
    assert_eq!(statement.effect, IamPolicyEffect::Allow);
    assert_eq!(statement.action, ["execute-api:Invoke"]);
    assert_eq!(
        statement.resource,
        ["arn:aws:execute-api:us-east-1:123456789012:abcdef123/prod/*/*"]
    );
    assert_eq!(
        response.context,
        json!({"orgId": "org-1", "sub": "local:org-1", "scope": "webhooks/read webhooks/write"})
    );
    assert_eq!(response.principal_id.as_deref(), Some("local:org-1"));
    // The JSON API Gateway reads.
    let wire = serde_json::to_value(&response).unwrap();
    assert_eq!(wire["policyDocument"]["Statement"][0]["Effect"], "Allow");
    assert_eq!(wire["context"]["orgId"], "org-1");
}

#[tokio::test]
async fn authorizer_refuses_missing_bad_and_expired_tokens() {
    let expired = {
        // exp one hour ago, beyond the verifier's leeway.
        use base64::Engine;
        let b64 = |v: Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(&v).unwrap())
        };
        let past = chrono::Utc::now().timestamp() - 3600;
        let signing_input = format!(
            "{}.{}",
            b64(json!({"alg": "HS256", "typ": "JWT"})),
            b64(json!({"org_id": "org-1", "exp": past, "scope": "webhooks/read"}))
        );
        let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, JWT_SECRET.as_bytes());
        let tag = aws_lc_rs::hmac::sign(&key, signing_input.as_bytes());
        format!(
            "{signing_input}.{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag.as_ref())
        )
    };
    let wrong_key = mint_hs256(
        "another-secret",
        "org_id",
        "org-1",
        &ALL_SCOPES,
        Duration::from_secs(300),
    );
    for (what, event) in [
        (
            "no token",
            authorizer_event("authorizer-request-no-token", None),
        ),
        ("placeholder", authorizer_event("authorizer-request", None)),
        (
            "garbage",
            authorizer_event("authorizer-request", Some("not.a.jwt")),
        ),
        (
            "wrong key",
            authorizer_event("authorizer-request", Some(&wrong_key)),
        ),
        (
            "expired",
            authorizer_event("authorizer-request", Some(&expired)),
        ),
    ] {
        assert_eq!(
            authorize(event).await.unwrap_err(),
            "Unauthorized",
            "{what}"
        );
    }
}

#[tokio::test]
async fn authorizer_denies_a_valid_token_without_an_organization() {
    let token = mint_hs256(
        JWT_SECRET,
        "tenant",
        "org-1",
        &ALL_SCOPES,
        Duration::from_secs(300),
    );
    let response = authorize(authorizer_event("authorizer-request", Some(&token)))
        .await
        .unwrap();
    assert_eq!(
        response.policy_document.statement[0].effect,
        IamPolicyEffect::Deny
    );
    assert_eq!(response.context, json!({}));
}
