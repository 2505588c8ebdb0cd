//! What the Lambda handler tests share: the app the functions build (on SQLite, or on
//! DynamoDB Local with `WEBHOOKS_TEST_BACKEND=aws`), invoking a handler with a sample event
//! of `events/`, and reading its answer.

use std::sync::Arc;

use http::StatusCode;
use lambda_http::{Body, Response};
use serde_json::{json, Value};
use webhook_core::aws::dynamodb::DynamoStore;
use webhook_core::clock::{Clock, SystemClock};
use webhook_core::lambda::{self, Endpoint};
use webhook_core::sqlite::SqliteDb;
use webhook_core::store::{Store, Upsert};
use webhook_core::{App, Config, Profile};

use crate::dynamodb_local;
use crate::sample_events;
use crate::{Handshake, Receiver};

pub const SUBSCRIPTION_ID: &str = "00000000-0000-4000-8000-000000000001";
pub const JWT_SECRET: &str = "test-hs256-secret";

/// The deployed configuration, plus http and loopback callbacks so the
/// handshake can reach a receiver on this machine.
pub fn config() -> Config {
    Config::from_lookup(Profile::Lambda, |var| match var {
        "WEBHOOKS_ALLOW_HTTP_CALLBACKS" | "WEBHOOKS_ALLOW_PRIVATE_CALLBACKS" => Some("true".into()),
        "WEBHOOKS_HANDSHAKE_TIMEOUT_MS" => Some("3000".into()),
        _ => None,
    })
    .unwrap()
}

/// A fresh store of the test's backend: an SQLite file of its own, or fresh tables in
/// DynamoDB Local with `WEBHOOKS_TEST_BACKEND=aws`; and an app on it per configuration (as
/// several functions share one deployment's tables).
pub async fn apps_with<const N: usize>(
    configs: [Config; N],
    label: &str,
) -> ([App; N], Arc<dyn Store>) {
    if crate::emulators::aws_backend() {
        let (client, tables) = dynamodb_local::fresh_tables(label).await;
        let store = Arc::new(DynamoStore::new(client, tables));
        (configs.map(|c| App::new(c, store.clone())), store)
    } else {
        // Kept for the test process's life: the handlers read it until the test ends.
        let dir = tempfile::tempdir().unwrap().keep();
        let store = Arc::new(SqliteDb::open(&dir.join("webhooks.db")).unwrap());
        (configs.map(|c| App::new(c, store.clone())), store)
    }
}

/// [`app_with`] the deployed configuration.
pub async fn app() -> (App, Arc<dyn Store>) {
    let ([app], store) = apps_with([config()], "events").await;
    (app, store)
}

/// The app on fresh tables in DynamoDB Local, whatever the backend setting.
pub async fn dynamo_app_with(config: Config, label: &str) -> (App, Arc<DynamoStore>) {
    let (client, tables) = dynamodb_local::fresh_tables(label).await;
    let store = Arc::new(DynamoStore::new(client, tables));
    (App::new(config, store.clone()), store)
}

pub async fn invoke(app: &App, endpoint: Endpoint, event: &str) -> (StatusCode, Value) {
    let response = lambda::handle(app, endpoint, sample_events::request(event))
        .await
        .expect("the handler never fails");
    split(response)
}

/// Invokes `endpoint` with `event` and asserts the problem's status and code.
pub async fn expect_problem(
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

/// Asserts an answer is the problem with this status and code.
pub fn assert_code(got: StatusCode, body: &Value, status: StatusCode, code: &str) {
    assert_eq!((got, body["code"].as_str()), (status, Some(code)), "{body}");
}

/// Status and JSON body; checks every error is problem+json with its status.
pub fn split(response: Response<Body>) -> (StatusCode, Value) {
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

pub async fn seed(store: &dyn Store, org: &str, id: &str, uri: &str, now: i64) {
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
}

pub fn now() -> i64 {
    SystemClock.now_ms()
}

/// A callback receiver on loopback that echoes the validation token (testkit's one receiver),
/// and its hook's uri; keep the receiver for as long as it must answer.
pub async fn receiver() -> (String, Receiver) {
    let receiver = Receiver::start(Handshake::Echo).await;
    (receiver.uri("/hook"), receiver)
}

/// The sample event `name`, edited by `edit` (a JSON value).
pub fn edited_request(name: &str, edit: impl FnOnce(&mut Value)) -> lambda_http::Request {
    let mut event: Value = serde_json::from_str(&sample_events::text(name)).unwrap();
    edit(&mut event);
    lambda_http::request::from_str(&event.to_string())
        .unwrap_or_else(|e| panic!("edited events/{name}.json is not an API Gateway event: {e}"))
}

/// Sets the query parameter `name` of an API Gateway event (both forms).
pub fn set_query(event: &mut Value, name: &str, value: &str) {
    event["queryStringParameters"][name] = Value::from(value);
    event["multiValueQueryStringParameters"][name] = json!([value]);
}
