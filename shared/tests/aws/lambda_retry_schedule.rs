//! A subscription's own retry schedule (`retrySchedule`) through the Lambda functions'
//! handlers on DynamoDB Local and moto: created by the create-subscription function
//! (`lambda::handle_with_queue`, its sample event with the field), its event ingested by
//! `ingest-events`, its notification's attempts made by `deliver-notifications` from the
//! delivery queue's messages, and read back by the get-notification function: each retry is
//! due after the subscription's wait (not the deployment's hour), and after the last the
//! notification is `FAILED` and dead-lettered.

use std::time::Duration;

use http::StatusCode;
use serde_json::{json, Value};
use testkit::lambda::{edited_request, split};
use testkit::sample_events;
use webhook_core::lambda::{self, queues, Endpoint};
use webhook_core::{App, Config, Profile};

use crate::lambda_queue_events::{dead_letters, events_batch, receive_as_event, world, World};

/// The deployment's schedule: one wait of an hour, so a retry the subscription's own
/// schedule did not time would not come within the test's bounds.
fn hour_config() -> Config {
    Config::from_lookup(Profile::Lambda, |var| match var {
        "WEBHOOKS_ALLOW_HTTP_CALLBACKS" | "WEBHOOKS_ALLOW_PRIVATE_CALLBACKS" => Some("true".into()),
        "WEBHOOKS_HANDSHAKE_TIMEOUT_MS" => Some("3000".into()),
        "WEBHOOKS_RETRY_SCHEDULE" => Some("1h".into()),
        "WEBHOOKS_BREAKER_FAILURES" => Some("1000".into()),
        _ => None,
    })
    .unwrap()
}

async fn invoke(
    w: &World,
    endpoint: Endpoint,
    request: lambda_http::Request,
) -> (StatusCode, Value) {
    let response = lambda::handle_with_queue(&w.app, Some(&w.queue), endpoint, request)
        .await
        .expect("the handler never fails");
    split(response)
}

fn epoch_ms(v: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(v.as_str().expect("a time"))
        .expect("ISO 8601")
        .timestamp_millis()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliver_notifications_follows_the_subscriptions_schedule_then_dead_letters() {
    let w = world().await;
    let w = World {
        app: App::new(hour_config(), w.store.clone()),
        ..w
    };
    let rx = testkit::Receiver::start(testkit::Handshake::Echo).await;
    let create = edited_request("create-subscription-ok", |event| {
        let mut body: Value = serde_json::from_str(event["body"].as_str().unwrap()).unwrap();
        body["uri"] = rx.uri("/hook").into();
        body["retrySchedule"] = json!(["2s", 3]);
        event["body"] = body.to_string().into();
    });
    let (status, sub) = invoke(&w, Endpoint::CreateSubscription, create).await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    assert_eq!(sub["retrySchedule"], json!(["2s", "3s"]), "{sub}");
    let id = sub["id"].as_str().unwrap().to_owned();
    // A refused one names the field, through the function too.
    let refused = edited_request("create-subscription-ok", |event| {
        let mut body: Value = serde_json::from_str(event["body"].as_str().unwrap()).unwrap();
        body["uri"] = rx.uri("/other").into();
        body["retrySchedule"] = json!(["13h"]);
        event["body"] = body.to_string().into();
    });
    let (status, problem) = invoke(&w, Endpoint::CreateSubscription, refused).await;
    assert_eq!(
        (status, &problem["code"], &problem["errors"][0]["field"]),
        (
            StatusCode::BAD_REQUEST,
            &json!("VALIDATION_FAILED"),
            &json!("retrySchedule[0]")
        ),
        "{problem}"
    );

    rx.break_with(500, "down");
    let ingested = queues::ingest_events(
        &w.app,
        &w.outbox,
        events_batch(&[("record-rs", "evt-rs", "carrier-rs")]),
    )
    .await;
    assert!(ingested.batch_item_failures.is_empty(), "{ingested:?}");
    let uuid = webhook_core::notification::notification_id("evt-rs", &id).to_string();
    let get = || {
        edited_request("get-notification-ok", |event| {
            event["pathParameters"] = json!({"id": id, "uuid": uuid});
            let path = format!("/webhooksubscription/{id}/notifications/{uuid}");
            event["path"] = path.clone().into();
            event["requestContext"]["path"] = format!("/prod{path}").into();
        })
    };
    let template = sample_events::text("deliver-notifications-sqs");
    // Each retry is due after its wait, kept to the second on SQS (±20 % jitter).
    for (n, wait_ms) in [(1usize, 2_000i64), (2, 3_000)] {
        let event = receive_as_event(&w, &template, Duration::from_secs(15))
            .await
            .unwrap_or_else(|| panic!("attempt {n}'s job never came"));
        let response = queues::deliver_notifications(&w.app, &w.queue, &w.outbox, event).await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
        let (status, h) = invoke(&w, Endpoint::GetNotification, get()).await;
        assert_eq!(status, StatusCode::OK, "{h}");
        assert_eq!(h["status"], "PENDING", "after attempt {n}: {h}");
        assert_eq!(h["attempts"].as_array().unwrap().len(), n, "{h}");
        let at = epoch_ms(&h["attempts"][n - 1]["timestamp"]);
        let next = epoch_ms(&h["nextAttemptTime"]) - at;
        assert!(
            (wait_ms * 8 / 10 - 1_000..=wait_ms * 12 / 10 + 1_000).contains(&next),
            "attempt {n}'s retry is due {next} ms after it, not {wait_ms} ms ±20 %: {h}"
        );
    }
    let last = receive_as_event(&w, &template, Duration::from_secs(15))
        .await
        .expect("the last attempt's job");
    let response = queues::deliver_notifications(&w.app, &w.queue, &w.outbox, last).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let (_, h) = invoke(&w, Endpoint::GetNotification, get()).await;
    assert_eq!(h["status"], "FAILED", "given up after the last wait: {h}");
    assert_eq!(h["attempts"].as_array().unwrap().len(), 3, "{h}");
    assert_eq!(h["nextAttemptTime"], Value::Null);
    assert_eq!(dead_letters(&w).await.len(), 1, "dead-lettered");
    assert_eq!(rx.count(), 3);
}
