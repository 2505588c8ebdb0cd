//! AWS destinations through the Lambda handlers (docs/decisions/destinations.md):
//! a destination subscription created by the handler `create-subscription`
//! calls (validated against moto's STS and SQS in a second account), its
//! notification delivered by the handler `deliver-notifications` calls, and
//! a deleted queue disabling the subscription there, the job kept as a dead
//! letter.

use crate::lambda_queue_events::{dead_letters, receive_as_event, World};
use testkit::sample_events;

use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use testkit::customer::{attribute, Customer};
use testkit::emulators::unique_name;
use webhook_core::api::subscriptions;
use webhook_core::auth::Caller;
use webhook_core::destinations::external_id;
use webhook_core::lambda::queues;
use webhook_core::model::{DestinationRequest, SubscriptionRequest, SubscriptionStatus};
use webhook_core::store::Store;

/// The queue functions' world, with the AWS destinations' sender built as
/// `services::aws::queue_functions` builds it, on moto (one endpoint for
/// every service it serves: SQS, STS, EventBridge).
async fn world() -> World {
    let moto = testkit::emulators::require(testkit::emulators::SQS);
    let mut w = crate::lambda_queue_events::world().await;
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(&moto)
        .load()
        .await;
    w.app.destinations = webhook_core::services::aws::destinations(&sdk);
    assert!(
        w.app.destinations.is_some(),
        "the region is set (AWS_REGION)"
    );
    w
}

/// The next delivery job, as Lambda's event source mapping hands it over.
async fn next_event(w: &World) -> SqsEvent {
    let template = sample_events::text("deliver-notifications-sqs");
    receive_as_event(w, &template, Duration::from_secs(10))
        .await
        .expect("no delivery job was queued")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destination_subscription_is_delivered_and_disabled_by_the_queue_functions() {
    let w = world().await;
    let customer = Customer::new();
    let (queue, role) = (unique_name("orders"), unique_name("role"));
    customer.create_queue(&queue).await;
    let external = external_id("webhooks", &"org-1".into());
    customer.role(&role, &external, &[&queue], &[]).await;

    // create-subscription's handler: validated (assume role, validation message), then stored.
    let caller = Caller::new("org-1", &["webhooks/write"]);
    let request = SubscriptionRequest {
        event_filters: Some(vec![
            "/orgId/org-1/department/dep-1/message?direction=inbound".into(),
        ]),
        destination: Some(DestinationRequest {
            kind: Some("sqs".into()),
            arn: Some(Customer::queue_arn(&queue)),
            role_arn: Some(Customer::role_arn(&role)),
        }),
        ..Default::default()
    };
    let sub = subscriptions::create_subscription(&w.app, &caller, request)
        .await
        .expect("the destination validates");
    assert_eq!(sub.destination.as_ref().unwrap().external_id, external);
    let validation = customer.wait_for(&queue, 1).await;
    assert!(attribute(&validation[0], "webhook-validation-token").len() > 20);

    // ingest-events, then deliver-notifications: into the customer's queue, signed.
    let sample: SqsEvent = serde_json::from_str(&sample_events::text("ingest-events-sqs")).unwrap();
    queues::ingest_events(&w.app, &w.outbox, sample).await;
    let event = next_event(&w).await;
    let response = queues::deliver_notifications(&w.app, &w.queue, &w.outbox, event).await;
    assert!(response.batch_item_failures.is_empty());
    let got = customer.wait_for(&queue, 1).await;
    let uuid = webhook_core::notification::notification_id("evt-sample-1", &sub.id).to_string();
    assert_eq!(attribute(&got[0], "webhook-id"), uuid);
    let secret = w
        .store
        .get_subscription(&"org-1".into(), &sub.id.as_str().into())
        .await
        .unwrap()
        .unwrap()
        .secret;
    let mut headers = http::HeaderMap::new();
    for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        headers.insert(name, attribute(&got[0], name).parse().unwrap());
    }
    standardwebhooks::Webhook::new(&secret)
        .unwrap()
        .verify(got[0]["Body"].as_str().unwrap().as_bytes(), &headers)
        .expect("signed as a POST is");

    // The customer deletes the queue: the next job disables the subscription
    // and is kept as a dead letter, not dropped.
    customer.delete_queue(&queue).await;
    let template = sample_events::text("deliver-notifications-sqs");
    let body = serde_json::from_str::<SqsEvent>(&template).unwrap().records[0]
        .body
        .clone()
        .unwrap()
        .replace("SUBSCRIPTION_ID_PLACEHOLDER", &sub.id);
    w.sqs
        .send_message()
        .queue_url(&w.queue_url)
        .message_body(&body)
        .send()
        .await
        .unwrap();
    let event = next_event(&w).await;
    let response = queues::deliver_notifications(&w.app, &w.queue, &w.outbox, event).await;
    assert!(
        response.batch_item_failures.is_empty(),
        "done with: dead-lettered"
    );
    let stored = w
        .store
        .get_subscription(&"org-1".into(), &sub.id.as_str().into())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, SubscriptionStatus::Blacklisted);
    assert_eq!(dead_letters(&w).await.len(), 1, "the job is kept");
}

/// The own-account attack through create-subscription's handler, its
/// account told by the stack (`WEBHOOKS_AWS_ACCOUNT_ID`): a role of the
/// service's account that any external id opens, and a queue of the
/// service's, refused before any call; IAM denies the same role to the
/// function's own role (template.yaml, proven by scripts/deploy-rehearsal.py).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_subscription_refuses_a_destination_in_the_services_own_account() {
    let mut w = world().await;
    w.app.config.aws_account_id = Some(testkit::customer::SERVICE_ACCOUNT.into());
    let service = Customer::service();
    let (queue, role) = (unique_name("service-events"), unique_name("service-role"));
    service.create_queue(&queue).await;
    service
        .role_trusting_any_external_id(&role, &[&queue])
        .await;
    let caller = Caller::new("org-1", &["webhooks/write"]);
    let request = SubscriptionRequest {
        event_filters: Some(vec![
            "/orgId/org-1/department/dep-1/message?direction=inbound".into(),
        ]),
        destination: Some(DestinationRequest {
            kind: Some("sqs".into()),
            arn: Some(service.queue(&queue)),
            role_arn: Some(service.role_of(&role)),
        }),
        ..Default::default()
    };
    let refused = subscriptions::create_subscription(&w.app, &caller, request)
        .await
        .unwrap_err();
    assert_eq!(
        (refused.status.as_u16(), refused.code.as_str()),
        (400, "DESTINATION_FORBIDDEN")
    );
    assert!(service
        .sessions_of(&service.role_of(&role))
        .await
        .is_empty());
    assert!(service.receive(&queue).await.is_empty());
}

/// A renamed stack (another external-id prefix than the subscription was
/// validated with) through deliver-notifications' handler: the job is
/// deferred, not attempted; the subscription stays ACTIVE with nothing
/// counted on it; the invocation's EMF line counts `ServiceFaults`, what
/// the operators' `ServiceFaultsAlarm` watches. The prefix restored, the
/// same notification is delivered.
#[tokio::test]
async fn a_changed_prefix_defers_counts_service_faults_and_disables_nothing() {
    use webhook_core::telemetry::emf;
    let mut w = world().await;
    let customer = Customer::new();
    let (queue, role) = (unique_name("orders"), unique_name("role"));
    customer.create_queue(&queue).await;
    let external = external_id("webhooks", &"org-1".into());
    customer.role(&role, &external, &[&queue], &[]).await;
    let caller = Caller::new("org-1", &["webhooks/write"]);
    let request = SubscriptionRequest {
        event_filters: Some(vec![
            "/orgId/org-1/department/dep-1/message?direction=inbound".into(),
        ]),
        destination: Some(DestinationRequest {
            kind: Some("sqs".into()),
            arn: Some(Customer::queue_arn(&queue)),
            role_arn: Some(Customer::role_arn(&role)),
        }),
        ..Default::default()
    };
    let sub = subscriptions::create_subscription(&w.app, &caller, request)
        .await
        .expect("the destination validates");
    customer.wait_for(&queue, 1).await;

    w.app.config.external_id_prefix = "renamed-stack".into();
    let sample: SqsEvent = serde_json::from_str(&sample_events::text("ingest-events-sqs")).unwrap();
    queues::ingest_events(&w.app, &w.outbox, sample).await;
    let event = next_event(&w).await;
    let (response, lines) = emf::capture(queues::deliver_notifications(
        &w.app, &w.queue, &w.outbox, event,
    ))
    .await;
    assert!(response.batch_item_failures.is_empty(), "settled: deferred");
    let line: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(
        (&line["ServiceFaults"], &line["Attempts.deferred"]),
        (&serde_json::json!(1), &serde_json::json!(1)),
        "{line}"
    );
    let stored = w
        .store
        .get_subscription(&"org-1".into(), &sub.id.as_str().into())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (stored.status, stored.health.failures, stored.failing_since),
        (SubscriptionStatus::Active, 0, None)
    );
    assert!(customer.receive(&queue).await.is_empty(), "nothing sent");

    w.app.config.external_id_prefix = "webhooks".into();
    let event = next_event(&w).await;
    let response = queues::deliver_notifications(&w.app, &w.queue, &w.outbox, event).await;
    assert!(response.batch_item_failures.is_empty());
    let got = customer.wait_for(&queue, 1).await;
    let uuid = webhook_core::notification::notification_id("evt-sample-1", &sub.id).to_string();
    assert_eq!(attribute(&got[0], "webhook-id"), uuid);
}
