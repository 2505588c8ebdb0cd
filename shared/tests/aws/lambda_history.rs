//! The delivery history functions (list, get, resend, recover, stats) fed their sample
//! events in `events/`, on DynamoDB Local, with the delivery queue on moto's SQS for the
//! functions that enqueue (`lambda::handle_with_queue`).

use testkit::lambda::*;
use testkit::sample_events;

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use serde_json::{json, Value};
use webhook_core::aws::dynamodb::DynamoStore;
use webhook_core::aws::outbox::AwsOutbox;
use webhook_core::aws::sqs::SqsQueue;
use webhook_core::history::{DeliveryHistory, NotificationStatus, Outcome, Trigger};
use webhook_core::ingest::{self, EventEnvelope};
use webhook_core::lambda::{self, Endpoint};
use webhook_core::queue::DeliveryJob;
use webhook_core::App;

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
    let (app, store) = dynamo_app_with(config(), "history").await;
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
        &*h.store,
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
        &*h.store,
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
        &*h.store,
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
        &*h.store,
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
        &*h.store,
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
        &*h.store,
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
