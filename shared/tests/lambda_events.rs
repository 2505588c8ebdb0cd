//! Every sample event in `events/`, fed to exactly the handler functions the
//! Lambda `main.rs` files call (`lambda::handle`, `lambda::handle_with_queue`,
//! `authorizer::authorize`), against DynamoDB Local with fresh tables per
//! test, and moto's SQS for the functions that enqueue (resend, recover).

mod dynamodb_local;

mod sample_events;

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::apigw::ApiGatewayCustomAuthorizerRequestTypeRequest;
use aws_lambda_events::iam::IamPolicyEffect;
use http::StatusCode;
use lambda_http::{Body, Response};
use serde_json::{json, Value};
use webhook_core::auth::jwt::{mint_hs256, Verifier, ALL_SCOPES};
use webhook_core::aws::dynamodb::DynamoStore;
use webhook_core::aws::outbox::AwsOutbox;
use webhook_core::aws::sqs::SqsQueue;
use webhook_core::clock::{Clock, SystemClock};
use webhook_core::config::JwtConfig;
use webhook_core::history::{DeliveryHistory, NotificationStatus, Outcome, Trigger};
use webhook_core::ids::{OrgId, SubscriptionId};
use webhook_core::ingest::{self, EventEnvelope};
use webhook_core::lambda::{self, authorizer, Endpoint};
use webhook_core::model::Message;
use webhook_core::page::{PageRequest, MAX_SIZE};
use webhook_core::queue::DeliveryJob;
use webhook_core::store::{Store, Upsert};
use webhook_core::{App, Config, Profile};

const SUBSCRIPTION_ID: &str = "00000000-0000-4000-8000-000000000001";
const JWT_SECRET: &str = "test-hs256-secret";

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
    let response = lambda::handle(app, endpoint, sample_events::request(event))
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

/// Asserts an answer is the problem with this status and code.
fn assert_code(got: StatusCode, body: &Value, status: StatusCode, code: &str) {
    assert_eq!((got, body["code"].as_str()), (status, Some(code)), "{body}");
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
    let mut event: Value =
        serde_json::from_str(&sample_events::text("create-subscription-ok")).unwrap();
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
        .list_subscriptions(&OrgId::from("org-1"), &PageRequest::first(MAX_SIZE), 0)
        .await
        .unwrap()
        .content;
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
        .list_subscriptions(&OrgId::from("org-1"), &PageRequest::first(MAX_SIZE), 0)
        .await
        .unwrap()
        .content
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
async fn rotate_subscription_secret() {
    let (app, store) = app().await;
    expect_problem(
        &app,
        Endpoint::RotateSubscriptionSecret,
        "rotate-subscription-secret-ok",
        StatusCode::NOT_FOUND,
        "SUBSCRIPTION_NOT_FOUND",
    )
    .await;
    // Another organization's subscription with that id is not found either.
    seed(
        &store,
        "org-2",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    expect_problem(
        &app,
        Endpoint::RotateSubscriptionSecret,
        "rotate-subscription-secret-ok",
        StatusCode::NOT_FOUND,
        "SUBSCRIPTION_NOT_FOUND",
    )
    .await;

    seed(
        &store,
        "org-1",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    let before = now();
    let (status, body) = invoke(
        &app,
        Endpoint::RotateSubscriptionSecret,
        "rotate-subscription-secret-ok",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let new_key = "whsec_cm90YXRlZC1zZWNyZXQtZm9yLXNhbXBsZS1ldmVudHM=";
    assert_eq!(body, json!({ "key": new_key }));
    let (_, secret) = invoke(
        &app,
        Endpoint::GetSubscriptionSecret,
        "get-subscription-secret-ok",
    )
    .await;
    assert_eq!(
        secret,
        json!({ "key": new_key }),
        "GET secret: the current key"
    );
    let stored = store
        .get_subscription(
            &OrgId::from("org-1"),
            &SubscriptionId::from(SUBSCRIPTION_ID),
        )
        .await
        .unwrap()
        .unwrap();
    let signing: Vec<&str> = stored.signing_secrets(now()).collect();
    assert_eq!(
        signing,
        [new_key, "whsec_c2VlZGVkLXNlY3JldC1mb3ItdGVzdHM="],
        "the old key signs during its grace period (3600 s)"
    );
    let grace_end = stored.previous_secrets[0].expires_at;
    assert!((before + 3_600_000..=now() + 3_600_000).contains(&grace_end));
    // The other organization's subscription is untouched.
    let other = store
        .get_subscription(
            &OrgId::from("org-2"),
            &SubscriptionId::from(SUBSCRIPTION_ID),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(other.secret, "whsec_c2VlZGVkLXNlY3JldC1mb3ItdGVzdHM=");
    assert!(other.previous_secrets.is_empty());

    // The same key again is refused (it is the current one).
    let (status, body) = invoke(
        &app,
        Endpoint::RotateSubscriptionSecret,
        "rotate-subscription-secret-ok",
    )
    .await;
    assert_code(status, &body, StatusCode::BAD_REQUEST, "VALIDATION_FAILED");
    assert_eq!(body["errors"][0]["field"], "key");
    let (status, body) = invoke(
        &app,
        Endpoint::RotateSubscriptionSecret,
        "rotate-subscription-secret-invalid",
    )
    .await;
    assert_code(status, &body, StatusCode::BAD_REQUEST, "VALIDATION_FAILED");
    let fields: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["gracePeriodSeconds", "key"]);
    assert!(!body.to_string().contains("dG9vLXNob3J0"), "{body}");
    // A read-only token cannot rotate.
    let read_only = edited_request("rotate-subscription-secret-ok", |e| {
        e["requestContext"]["authorizer"]["scope"] = json!("webhooks/read");
    });
    let response = lambda::handle(&app, Endpoint::RotateSubscriptionSecret, read_only)
        .await
        .unwrap();
    let (status, body) = split(response);
    assert_code(status, &body, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
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
        .put_message(&OrgId::from("org-1"), &message, app.now_ms())
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
// Delivery history: list, get, resend, recover and stats, with the delivery
// queue on moto's SQS for the functions that enqueue (`handle_with_queue`).

/// The notification the history samples name: the one `HISTORY_EVENT_ID`
/// makes for `SUBSCRIPTION_ID` (`notification_id`).
const NOTIFICATION_ID: &str = "6c207535-4179-5fd6-a332-9fe65e78f76e";
const HISTORY_EVENT_ID: &str = "evt-history-1";
const HOUR_MS: i64 = 3_600_000;

/// The app on DynamoDB Local, and the delivery queue on moto (fresh ones),
/// with the outbox ingestion commits to.
struct History {
    app: App,
    store: Arc<DynamoStore>,
    queue: SqsQueue,
    outbox: AwsOutbox,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
}

async fn history() -> History {
    testkit::emulators::require(testkit::emulators::SQS);
    let (app, store) = app().await;
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let queue_url = sqs
        .create_queue()
        .queue_name(testkit::emulators::unique_name("events-delivery"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("creating a queue on moto: {e}"))
        .queue_url()
        .expect("a queue url")
        .to_owned();
    let queue = SqsQueue::new(sqs.clone(), queue_url.clone(), None);
    let outbox = AwsOutbox::new(store.clone(), queue.clone(), app.clock.clone());
    History {
        app,
        store,
        queue,
        outbox,
        sqs,
        queue_url,
    }
}

impl History {
    async fn invoke(
        &self,
        endpoint: Endpoint,
        request: lambda_http::Request,
    ) -> (StatusCode, Value) {
        let response = lambda::handle_with_queue(&self.app, Some(&self.queue), endpoint, request)
            .await
            .expect("the handler never fails");
        split(response)
    }

    /// Ingests the event of `HISTORY_EVENT_ID` through the real ingestion
    /// path: it notifies org-1's subscriptions to dep-1's inbound messages.
    async fn ingest(&self) -> usize {
        let envelope: EventEnvelope = serde_json::from_value(json!({
            "eventId": HISTORY_EVENT_ID,
            "type": "message.inbound",
            "organizationId": "org-1",
            "departmentId": "dep-1",
            "message": {
                "id": "msg-history-1",
                "direction": "in",
                "to": ["+15550100"],
                "from": "+15550199",
                "text": "Hello from the history test"
            },
            "carrierMessageId": "carrier-history-1",
            "status": "RECEIVED"
        }))
        .unwrap();
        let event = envelope.validate(now()).unwrap();
        ingest::ingest(&self.app, &self.outbox, event)
            .await
            .unwrap()
            .notifications
    }

    /// The jobs on the delivery queue (received, so invisible afterwards).
    async fn jobs(&self, wait: Duration) -> Vec<DeliveryJob> {
        let start = std::time::Instant::now();
        let mut jobs = Vec::new();
        loop {
            let out = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(10)
                .visibility_timeout(300)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap();
            for m in out.messages() {
                jobs.push(serde_json::from_str(m.body().unwrap()).expect("a delivery job"));
            }
            if !jobs.is_empty() || start.elapsed() > wait {
                return jobs;
            }
        }
    }
}

/// The sample event `name`, edited by `edit` (a JSON value).
fn edited_request(name: &str, edit: impl FnOnce(&mut Value)) -> lambda_http::Request {
    let mut event: Value = serde_json::from_str(&sample_events::text(name)).unwrap();
    edit(&mut event);
    lambda_http::request::from_str(&event.to_string())
        .unwrap_or_else(|e| panic!("edited events/{name}.json is not an API Gateway event: {e}"))
}

/// Sets the query parameter `name` of an API Gateway event (both forms).
fn set_query(event: &mut Value, name: &str, value: &str) {
    event["queryStringParameters"][name] = Value::from(value);
    event["multiValueQueryStringParameters"][name] = json!([value]);
}

/// The recover sample with a window that starts `since_ago` ms ago and
/// ends now (the sample's own window is long past the retention).
fn recover_request(since_ago: i64) -> lambda_http::Request {
    edited_request("recover-notifications-ok", |event| {
        let mut body: Value = serde_json::from_str(event["body"].as_str().unwrap()).unwrap();
        assert!(
            body["since"].is_i64() && body["until"].is_i64(),
            "the sample names its window: {body}"
        );
        let t = now();
        body["since"] = json!(t - since_ago);
        body["until"] = json!(t + 1);
        event["body"] = Value::from(body.to_string());
    })
}

/// The stats sample with the window of the last `hours` hours.
fn stats_request(hours: i64) -> lambda_http::Request {
    edited_request("get-delivery-stats-ok", |event| {
        let t = now();
        set_query(event, "since", &(t - hours * HOUR_MS).to_string());
        set_query(event, "until", &(t + 1).to_string());
    })
}

#[test]
fn history_samples_name_the_notification_of_their_event() {
    assert_eq!(
        webhook_core::notification::notification_id(HISTORY_EVENT_ID, SUBSCRIPTION_ID).to_string(),
        NOTIFICATION_ID
    );
    for name in ["get-notification-ok", "resend-notification-ok"] {
        let event: Value = serde_json::from_str(&sample_events::text(name)).unwrap();
        assert_eq!(
            event["pathParameters"],
            json!({"id": SUBSCRIPTION_ID, "uuid": NOTIFICATION_ID}),
            "{name}"
        );
    }
}

#[tokio::test]
async fn list_notifications() {
    let h = history().await;
    let list = || sample_events::request("list-notifications-ok");
    // An unknown id, then another organization's subscription with that id.
    let (status, body) = h.invoke(Endpoint::ListNotifications, list()).await;
    assert_code(
        status,
        &body,
        StatusCode::NOT_FOUND,
        "SUBSCRIPTION_NOT_FOUND",
    );
    seed(
        &h.store,
        "org-2",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    let (status, body) = h.invoke(Endpoint::ListNotifications, list()).await;
    assert_code(
        status,
        &body,
        StatusCode::NOT_FOUND,
        "SUBSCRIPTION_NOT_FOUND",
    );

    seed(
        &h.store,
        "org-1",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    let (status, page) = h.invoke(Endpoint::ListNotifications, list()).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(
        (&page["totalElements"], &page["content"], &page["empty"]),
        (&json!(0), &json!([]), &json!(true)),
        "{page}"
    );
    assert_eq!(page["size"], 20, "{page}");
    assert_eq!(page["number"], 0, "{page}");
    assert_eq!(page["sort"][0]["property"], "createdDateTime", "{page}");
    assert_eq!(page["sort"][0]["direction"], "DESC", "{page}");

    assert_eq!(h.ingest().await, 1);
    let (status, page) = h.invoke(Endpoint::ListNotifications, list()).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["totalElements"], 1, "{page}");
    let listed = &page["content"][0];
    assert_eq!(listed["uuid"], NOTIFICATION_ID, "{page}");
    assert_eq!(listed["eventId"], HISTORY_EVENT_ID);
    assert_eq!(listed["subscriptionId"], SUBSCRIPTION_ID);
    assert_eq!(
        listed["event"],
        "/orgId/org-1/department/dep-1/message?direction=inbound"
    );
    assert_eq!(listed["status"], "PENDING");
    assert_eq!(listed["attempts"], 0);
    assert!(listed.get("payload").is_none(), "a list has no payloads");

    // The status filter of the sample (PENDING,FAILED) leaves out DELIVERED ones.
    let (status, page) = h
        .invoke(
            Endpoint::ListNotifications,
            edited_request("list-notifications-ok", |e| {
                set_query(e, "status", "DELIVERED")
            }),
        )
        .await;
    assert_eq!(
        (status, &page["totalElements"]),
        (StatusCode::OK, &json!(0)),
        "{page}"
    );
    let (status, body) = h
        .invoke(
            Endpoint::ListNotifications,
            edited_request("list-notifications-ok", |e| set_query(e, "status", "LOST")),
        )
        .await;
    assert_code(status, &body, StatusCode::BAD_REQUEST, "VALIDATION_FAILED");
}

#[tokio::test]
async fn get_notification_after_ingestion() {
    let h = history().await;
    let get = || sample_events::request("get-notification-ok");
    let (status, body) = h.invoke(Endpoint::GetNotification, get()).await;
    assert_code(
        status,
        &body,
        StatusCode::NOT_FOUND,
        "SUBSCRIPTION_NOT_FOUND",
    );
    seed(
        &h.store,
        "org-1",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    let (status, body) = h.invoke(Endpoint::GetNotification, get()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("NOTIFICATION_NOT_FOUND")),
        "an unknown uuid: {body}"
    );

    assert_eq!(h.ingest().await, 1);
    let (status, body) = h.invoke(Endpoint::GetNotification, get()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["uuid"], NOTIFICATION_ID);
    assert_eq!(body["eventId"], HISTORY_EVENT_ID);
    assert_eq!(body["subscriptionId"], SUBSCRIPTION_ID);
    assert_eq!(body["status"], "PENDING");
    assert_eq!(body["attempts"], json!([]), "no attempt yet: {body}");
    // The payload is the notification exactly as it is POSTed.
    let payload = &body["payload"];
    assert_eq!(payload["uuid"], NOTIFICATION_ID, "{body}");
    assert_eq!(payload["subscriptionId"], SUBSCRIPTION_ID);
    assert_eq!(
        payload["event"],
        "/orgId/org-1/department/dep-1/message?direction=inbound"
    );
    assert_eq!(payload["messageInfo"]["messageId"], "msg-history-1");
    assert_eq!(
        payload["messageInfo"]["carrierMessageId"],
        "carrier-history-1"
    );
    // ... and the body of the job ingestion put on the delivery queue.
    let jobs = h.jobs(Duration::from_secs(5)).await;
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0].id, NOTIFICATION_ID);
    assert_eq!(
        serde_json::from_str::<Value>(&jobs[0].body).unwrap(),
        *payload
    );

    // Another organization does not see it.
    let (status, body) = h
        .invoke(
            Endpoint::GetNotification,
            edited_request("get-notification-ok", |e| {
                e["requestContext"]["authorizer"]["orgId"] = json!("org-2")
            }),
        )
        .await;
    assert_code(
        status,
        &body,
        StatusCode::NOT_FOUND,
        "SUBSCRIPTION_NOT_FOUND",
    );
}

#[tokio::test]
async fn resend_notification() {
    let h = history().await;
    let resend = || sample_events::request("resend-notification-ok");
    seed(
        &h.store,
        "org-1",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    let (status, body) = h.invoke(Endpoint::ResendNotification, resend()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("NOTIFICATION_NOT_FOUND")),
        "an unknown uuid: {body}"
    );
    assert!(
        h.jobs(Duration::from_secs(1)).await.is_empty(),
        "nothing enqueued"
    );

    assert_eq!(h.ingest().await, 1);
    let ingested = h.jobs(Duration::from_secs(5)).await;
    assert_eq!(ingested.len(), 1, "{ingested:?}");

    let (status, body) = h.invoke(Endpoint::ResendNotification, resend()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body, json!({"uuid": NOTIFICATION_ID, "status": "PENDING"}));
    let resent = h.jobs(Duration::from_secs(5)).await;
    assert_eq!(resent.len(), 1, "{resent:?}");
    assert_eq!(resent[0].id, NOTIFICATION_ID);
    assert_eq!(resent[0].subscription_id, SUBSCRIPTION_ID);
    assert_eq!(resent[0].trigger, Trigger::Manual);
    assert_eq!(resent[0].body, ingested[0].body, "the same payload again");
    assert_eq!(resent[0].created_at, ingested[0].created_at);

    // A read-only caller may not resend.
    let (status, body) = h
        .invoke(
            Endpoint::ResendNotification,
            edited_request("resend-notification-ok", |e| {
                e["requestContext"]["authorizer"]["scope"] = json!("webhooks/read")
            }),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
}

#[tokio::test]
async fn recover_notifications() {
    let h = history().await;
    let (status, body) = h
        .invoke(Endpoint::RecoverNotifications, recover_request(HOUR_MS))
        .await;
    assert_code(
        status,
        &body,
        StatusCode::NOT_FOUND,
        "SUBSCRIPTION_NOT_FOUND",
    );
    seed(
        &h.store,
        "org-1",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    let (status, body) = h
        .invoke(Endpoint::RecoverNotifications, recover_request(HOUR_MS))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body, json!({"notifications": 0, "more": false}));

    // A PENDING notification is not recovered; once FAILED, it is.
    assert_eq!(h.ingest().await, 1);
    let jobs = h.jobs(Duration::from_secs(5)).await;
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let (status, body) = h
        .invoke(Endpoint::RecoverNotifications, recover_request(HOUR_MS))
        .await;
    assert_eq!(
        (status, body),
        (
            StatusCode::ACCEPTED,
            json!({"notifications": 0, "more": false})
        )
    );
    h.store
        .record_outcome(
            &jobs[0],
            &Outcome {
                status: NotificationStatus::Failed,
                next_attempt_at: None,
                attempt: None,
                code: Some("SUBSCRIPTION_NOT_ACTIVE".into()),
            },
        )
        .await
        .unwrap();
    let (status, body) = h
        .invoke(Endpoint::RecoverNotifications, recover_request(HOUR_MS))
        .await;
    assert_eq!(
        (status, body),
        (
            StatusCode::ACCEPTED,
            json!({"notifications": 1, "more": false})
        )
    );
    let recovered = h.jobs(Duration::from_secs(5)).await;
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert_eq!(recovered[0].id, NOTIFICATION_ID);
    assert_eq!(recovered[0].trigger, Trigger::Manual);
    let (status, body) = h
        .invoke(
            Endpoint::GetNotification,
            sample_events::request("get-notification-ok"),
        )
        .await;
    assert_eq!(
        (status, &body["status"]),
        (StatusCode::OK, &json!("PENDING")),
        "marked PENDING again: {body}"
    );

    // The sample's own window (November 2025) reaches past the retention.
    let (status, body) = h
        .invoke(
            Endpoint::RecoverNotifications,
            sample_events::request("recover-notifications-ok"),
        )
        .await;
    assert_code(status, &body, StatusCode::BAD_REQUEST, "VALIDATION_FAILED");
    let (status, body) = h
        .invoke(
            Endpoint::RecoverNotifications,
            recover_request(31 * 24 * HOUR_MS),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("VALIDATION_FAILED")),
        "past the 30 days' retention: {body}"
    );
}

#[tokio::test]
async fn get_delivery_stats() {
    let h = history().await;
    let (status, body) = h.invoke(Endpoint::GetDeliveryStats, stats_request(2)).await;
    assert_code(
        status,
        &body,
        StatusCode::NOT_FOUND,
        "SUBSCRIPTION_NOT_FOUND",
    );
    seed(
        &h.store,
        "org-1",
        SUBSCRIPTION_ID,
        "https://example.com/x",
        now(),
    )
    .await;
    let (status, stats) = h.invoke(Endpoint::GetDeliveryStats, stats_request(2)).await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    let buckets = stats["buckets"].as_array().expect("buckets");
    assert!(
        (2..=3).contains(&buckets.len()),
        "one per hour of the window: {stats}"
    );
    assert_eq!(stats["totals"]["notifications"], 0, "{stats}");

    assert_eq!(h.ingest().await, 1);
    let (status, stats) = h.invoke(Endpoint::GetDeliveryStats, stats_request(2)).await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert_eq!(stats["totals"]["notifications"], 1, "{stats}");
    assert_eq!(stats["totals"]["pending"], 1, "{stats}");

    // The sample itself: its window (November 2025) is past the retention.
    let (status, stats) = h
        .invoke(
            Endpoint::GetDeliveryStats,
            sample_events::request("get-delivery-stats-ok"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert_eq!(stats["totals"]["notifications"], 0, "{stats}");
    let (status, body) = h
        .invoke(Endpoint::GetDeliveryStats, stats_request(32 * 24))
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("VALIDATION_FAILED")),
        "a window of more than 31 days: {body}"
    );
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
        scopes: Default::default(),
    })
}

fn authorizer_event(
    name: &str,
    token: Option<&str>,
) -> ApiGatewayCustomAuthorizerRequestTypeRequest {
    let mut text = sample_events::text(name);
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

/// An identity provider's own scope names (`WEBHOOKS_READ_SCOPES`,
/// `WEBHOOKS_WRITE_SCOPES`): accepted by the authorizer and the functions
/// only when configured; the default names are then not enough.
#[tokio::test]
async fn custom_scope_names_are_honoured_only_when_configured() {
    const READ: &str = "https://com.beetexting.scopes/ReadContact";
    const WRITE: &str = "https://com.beetexting.scopes/WriteContact";
    let lookup = |custom: bool| {
        move |var: &str| match var {
            "WEBHOOKS_JWT_HS256_SECRET" => Some(JWT_SECRET.to_owned()),
            "WEBHOOKS_READ_SCOPES" if custom => Some(READ.to_owned()),
            "WEBHOOKS_WRITE_SCOPES" if custom => Some(WRITE.to_owned()),
            _ => None,
        }
    };
    let custom = Config::from_lookup(Profile::Lambda, lookup(true)).unwrap();
    let default = Config::from_lookup(Profile::Lambda, lookup(false)).unwrap();
    let token = |scopes: &[&str]| {
        mint_hs256(
            JWT_SECRET,
            "org_id",
            "org-1",
            scopes,
            Duration::from_secs(300),
        )
    };
    let effect = |config: &Config, token: String| {
        let verifier = Verifier::new(&config.jwt);
        async move {
            let event = authorizer_event("authorizer-request", Some(&token));
            let response = authorizer::authorize(
                &verifier,
                lambda_runtime::LambdaEvent::new(event, lambda_runtime::Context::default()),
            )
            .await
            .unwrap();
            (
                response.policy_document.statement[0].effect.clone(),
                response.context["scope"].clone(),
            )
        }
    };
    assert_eq!(
        effect(&custom, token(&[READ, WRITE])).await,
        (IamPolicyEffect::Allow, json!(format!("{READ} {WRITE}")))
    );
    assert_eq!(
        effect(&custom, token(&ALL_SCOPES)).await.0,
        IamPolicyEffect::Deny
    );
    assert_eq!(
        effect(&default, token(&[READ, WRITE])).await.0,
        IamPolicyEffect::Deny
    );
    assert_eq!(
        effect(&default, token(&ALL_SCOPES)).await.0,
        IamPolicyEffect::Allow
    );

    // The function checks the route's scope with the same configuration.
    let (client, tables) = dynamodb_local::fresh_tables("scopes").await;
    let store = Arc::new(DynamoStore::new(client, tables));
    seed(
        &store,
        "org-1",
        SUBSCRIPTION_ID,
        "https://example.com/s",
        now(),
    )
    .await;
    let custom_app = App::new(custom, store.clone());
    let default_app = App::new(default, store);
    assert_eq!(get(&custom_app, READ).await.0, StatusCode::OK);
    let (status, body) = get(&custom_app, "webhooks/read webhooks/write").await;
    assert_code(status, &body, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
    assert!(body["detail"].as_str().unwrap().contains(READ), "{body}");
    let (status, body) = get(&custom_app, WRITE).await;
    assert_code(status, &body, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
    let (status, body) = get(&default_app, READ).await;
    assert_code(status, &body, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
    assert_eq!(get(&default_app, "webhooks/read").await.0, StatusCode::OK);
}

/// `get-subscription-ok` with the authorizer context's `scope` replaced.
async fn get(app: &App, scope: &str) -> (StatusCode, Value) {
    let request = edited_request("get-subscription-ok", |e| {
        e["requestContext"]["authorizer"]["scope"] = json!(scope);
    });
    split(
        lambda::handle(app, Endpoint::GetSubscription, request)
            .await
            .unwrap(),
    )
}
