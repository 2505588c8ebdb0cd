//! A subscription's custom headers through the Lambda handlers on DynamoDB Local and moto:
//! created by the `create-subscription` function's handler (`lambda::handle`), whose
//! handshake carries them; an event fanned out by `ingest-events`; its delivery by
//! `deliver-notifications` arrives at the receiver with them, signed as before.

use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use http::StatusCode;
use serde_json::{json, Value};
use testkit::lambda::split;
use testkit::sample_events;
use webhook_core::ids::{OrgId, SubscriptionId};
use webhook_core::lambda::{self, queues, Endpoint};
use webhook_core::store::Store;

use crate::lambda_queue_events::{receive_as_event, world};

/// One events-queue record: an inbound message of org-1's dep-1.
fn event_batch(event: &str) -> SqsEvent {
    let sample: Value = serde_json::from_str(&sample_events::text("ingest-events-sqs")).unwrap();
    let mut record = sample["Records"][0].clone();
    record["messageId"] = format!("record-{event}").into();
    record["body"] = json!({
        "eventId": event, "type": "message.inbound", "organizationId": "org-1",
        "departmentId": "dep-1", "status": "RECEIVED",
        "message": {"id": format!("msg-{event}"), "to": ["+15550001"], "from": "+15550199", "text": "hi"},
    })
    .to_string()
    .into();
    serde_json::from_value(json!({ "Records": [record] })).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lambda_functions_create_and_deliver_with_the_custom_headers() {
    let w = world().await;
    let rx = testkit::Receiver::start(testkit::Handshake::Echo).await;
    let uri = rx.uri("/hook");

    // Create through the function's handler, with the sample event's caller (org-1).
    let mut event: Value =
        serde_json::from_str(&sample_events::text("create-subscription-ok")).unwrap();
    let mut body: Value = serde_json::from_str(event["body"].as_str().unwrap()).unwrap();
    body["uri"] = uri.clone().into();
    body["customHeaders"] = json!({"Authorization": "Bearer lambda-0123456789", "X-Route": "eu"});
    event["body"] = body.to_string().into();
    let request = lambda_http::request::from_str(&event.to_string()).unwrap();
    let response = lambda::handle(&w.app, Endpoint::CreateSubscription, request)
        .await
        .unwrap();
    let (status, created) = split(response);
    assert_eq!(status, StatusCode::OK, "{created}");
    assert_eq!(
        created["customHeaders"],
        json!({"Authorization": "…6789", "X-Route": "…"}),
        "shown masked"
    );
    let handshake = rx.handshakes().pop().expect("a handshake");
    assert_eq!(handshake["authorization"], "Bearer lambda-0123456789");
    let id = created["id"].as_str().unwrap();
    let secret = w
        .store
        .get_subscription(&OrgId::from("org-1"), &SubscriptionId::from(id))
        .await
        .unwrap()
        .unwrap()
        .secret;

    // Fan out through ingest-events, deliver through deliver-notifications.
    let response = queues::ingest_events(&w.app, &w.outbox, event_batch("evt-ch-lambda")).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let template = sample_events::text("deliver-notifications-sqs");
    let job = receive_as_event(&w, &template, Duration::from_secs(5))
        .await
        .expect("a delivery job");
    let response = queues::deliver_notifications(&w.app, &w.queue, &w.outbox, job).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    let posts = rx.received();
    assert_eq!(posts.len(), 1);
    let post = &posts[0];
    assert_eq!(post.header("authorization"), "Bearer lambda-0123456789");
    assert_eq!(post.header("x-route"), "eu");
    assert_eq!(post.header("content-type"), "application/json");
    standardwebhooks::Webhook::new(&secret)
        .unwrap()
        .verify(&post.body, &post.headers)
        .expect("signed as before");
}
