//! `v1a` (ed25519) signatures through the Lambda handlers on DynamoDB Local and moto: the
//! subscription function's handler creates a `v1a` subscription (`create-subscription-ok` with
//! `signatureScheme`), `GET .../secret` answers its public key and nothing else, and the
//! notification that `ingest-events` and `deliver-notifications` deliver verifies with it in
//! `ed25519-dalek` (an ed25519 the service does not use); rotated through the handler, the old
//! and the new key both sign during the grace period.

use aws_lambda_events::event::sqs::SqsEvent;
use http::StatusCode;
use serde_json::{json, Value};
use std::time::Duration;
use webhook_core::lambda::{self, queues, Endpoint};

use crate::lambda_queue_events::{receive_as_event, world, World};
use testkit::lambda::{edited_request, split};
use testkit::sample_events;
use testkit::standard_webhooks::{verify, Check};

/// The answer of the subscription function's handler to sample `name`, edited.
async fn call(
    w: &World,
    endpoint: Endpoint,
    name: &str,
    edit: impl FnOnce(&mut Value),
) -> (StatusCode, Value) {
    let response = lambda::handle(&w.app, endpoint, edited_request(name, edit))
        .await
        .unwrap();
    split(response)
}

/// Points a sample of `/webhooksubscription/{id}/...` at subscription `id`.
fn at(event: &mut Value, id: &str) {
    let sample = "00000000-0000-4000-8000-000000000001";
    event["pathParameters"]["id"] = id.into();
    let path = event["path"].as_str().unwrap().replace(sample, id);
    event["path"] = path.into();
}

/// Ingests inbound message `event_id` for org-1's dep-1 and delivers its notification through
/// the handlers; answers what the receiver got last.
async fn deliver(w: &World, rx: &testkit::Receiver, event_id: &str) -> testkit::Received {
    let sample: Value = serde_json::from_str(&sample_events::text("ingest-events-sqs")).unwrap();
    let mut record = sample["Records"][0].clone();
    record["messageId"] = format!("record-{event_id}").into();
    record["body"] = json!({
        "eventId": event_id, "type": "message.inbound", "organizationId": "org-1",
        "departmentId": "dep-1", "status": "RECEIVED",
        "message": {"id": format!("msg-{event_id}"), "to": ["+15550001"], "from": "+15550199", "text": "hi"},
    })
    .to_string()
    .into();
    let batch: SqsEvent = serde_json::from_value(json!({ "Records": [record] })).unwrap();
    let response = queues::ingest_events(&w.app, &w.outbox, batch).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let template = sample_events::text("deliver-notifications-sqs");
    let job = receive_as_event(w, &template, Duration::from_secs(5))
        .await
        .expect("a job");
    let response = queues::deliver_notifications(&w.app, &w.queue, &w.outbox, job).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    rx.received().pop().expect("delivered")
}

fn whole(secret: &str) -> Check<'_> {
    Check {
        secret,
        signature: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1a_subscription_through_the_handlers_is_verified_with_its_public_key() {
    let w = world().await;
    let rx = testkit::Receiver::start(testkit::Handshake::Echo).await;
    let uri = rx.uri("/hook");
    let (status, sub) = call(
        &w,
        Endpoint::CreateSubscription,
        "create-subscription-ok",
        |e| {
            let mut body: Value = serde_json::from_str(e["body"].as_str().unwrap()).unwrap();
            body["uri"] = uri.clone().into();
            body["signatureScheme"] = "v1a".into();
            e["body"] = body.to_string().into();
        },
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    assert_eq!(sub["signatureScheme"], "v1a");
    let id = sub["id"].as_str().unwrap().to_owned();

    let (status, secret) = call(
        &w,
        Endpoint::GetSubscriptionSecret,
        "get-subscription-secret-ok",
        |e| at(e, &id),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{secret}");
    let members: Vec<&String> = secret.as_object().unwrap().keys().collect();
    assert_eq!(members, ["publicKey"], "never the private key: {secret}");
    let old = secret["publicKey"].as_str().unwrap().to_owned();

    let first = deliver(&w, &rx, "evt-v1a-1").await;
    let header = first.header("webhook-signature");
    assert!(
        header.starts_with("v1a,") && !header.contains(' '),
        "{header}"
    );
    assert_eq!(verify(&first, &[whole(&old)]), [true]);

    let (status, rotated) = call(
        &w,
        Endpoint::RotateSubscriptionSecret,
        "rotate-subscription-secret-ok",
        |e| {
            at(e, &id);
            e["body"] = json!({"gracePeriodSeconds": 3600}).to_string().into();
        },
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{rotated}");
    let new = rotated["publicKey"]
        .as_str()
        .expect("a v1a rotation answers its public key")
        .to_owned();
    assert!(rotated.get("key").is_none() && new != old, "{rotated}");

    let during = deliver(&w, &rx, "evt-v1a-2").await;
    let header = during.header("webhook-signature").to_owned();
    assert_eq!(header.split(' ').count(), 2, "{header}");
    assert!(header.split(' ').all(|s| s.starts_with("v1a,")), "{header}");
    let other = testkit::Receiver::start(testkit::Handshake::Echo).await;
    let (_, stranger) = call(
        &w,
        Endpoint::CreateSubscription,
        "create-subscription-ok",
        |e| {
            let mut body: Value = serde_json::from_str(e["body"].as_str().unwrap()).unwrap();
            body["uri"] = other.uri("/other").into();
            body["signatureScheme"] = "v1a".into();
            e["body"] = body.to_string().into();
        },
    )
    .await;
    let stranger_id = stranger["id"].as_str().unwrap().to_owned();
    let (_, stranger) = call(
        &w,
        Endpoint::GetSubscriptionSecret,
        "get-subscription-secret-ok",
        |e| at(e, &stranger_id),
    )
    .await;
    let stranger = stranger["publicKey"].as_str().unwrap().to_owned();
    assert_eq!(
        verify(&during, &[whole(&new), whole(&old), whole(&stranger)]),
        [true, true, false],
        "both keys sign during the grace period; another subscription's key verifies nothing"
    );
}
