//! The queue functions' Lambda events (`ingest-events`, `deliver-notifications`,
//! `remind-expiring`) fed to exactly the handlers those functions call, against DynamoDB
//! Local and moto's SQS, with a real callback receiver. This file is their harness (also the
//! destinations' harness, `lambda_destinations`); each behaviour is a file of its own.

mod batching;
mod frozen_emulators;
mod metrics_and_traces;
mod ordering;
mod rate_limit;
mod redelivery;
mod samples;

use testkit::dynamodb_local;

use testkit::sample_events;

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use serde_json::{json, Value};
use testkit::{Handshake, Receiver};
use webhook_core::aws::dynamodb::DynamoStore;
use webhook_core::aws::outbox::AwsOutbox;
use webhook_core::aws::sqs::SqsQueue;
use webhook_core::ids::{OrgId, SubscriptionId};
use webhook_core::lambda::{queues, schedule};
use webhook_core::model::SubscriptionStatus;
use webhook_core::queue::DeliveryJob;
use webhook_core::store::{Store, Upsert};
use webhook_core::{App, Config, Profile};

/// A callback receiver and its hook's uri.
async fn receiver() -> (Receiver, String) {
    let r = Receiver::start(Handshake::Echo).await;
    let uri = r.uri("/hook");
    (r, uri)
}

/// The queue functions' parts on DynamoDB Local and moto (also the
/// destinations' harness, `lambda_destinations`).
pub(crate) struct World {
    pub(crate) app: App,
    pub(crate) outbox: AwsOutbox,
    pub(crate) queue: SqsQueue,
    pub(crate) sqs: aws_sdk_sqs::Client,
    pub(crate) queue_url: String,
    pub(crate) dlq_url: String,
    pub(crate) store: Arc<DynamoStore>,
}

pub(crate) async fn world() -> World {
    world_on(None).await
}

/// `bounded`: the store built as the functions build it, with the batch
/// call bounds (`services::aws::queue_functions`), instead of the SDK's
/// defaults.
async fn world_on(bounded: Option<aws_config::SdkConfig>) -> World {
    testkit::emulators::require(testkit::emulators::SQS);
    let config = Config::from_lookup(Profile::Lambda, |var| match var {
        "WEBHOOKS_ALLOW_HTTP_CALLBACKS" | "WEBHOOKS_ALLOW_PRIVATE_CALLBACKS" => Some("true".into()),
        "WEBHOOKS_RETRY_SCHEDULE" => Some("1s,1s".into()),
        _ => None,
    })
    .unwrap();
    let (client, tables) = dynamodb_local::fresh_tables("queues").await;
    let store = Arc::new(match &bounded {
        Some(sdk) => DynamoStore::from_sdk(sdk, tables),
        None => DynamoStore::new(client, tables),
    });
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let name = format!("delivery-{}", uuid::Uuid::new_v4().simple());
    let dlq_url = sqs
        .create_queue()
        .queue_name(format!("{name}-dlq"))
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_owned();
    let queue_url = sqs
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_owned();
    // The functions' queue client has the call bounds when given; the
    // test's own (`sqs`) has none.
    let queue_client = bounded
        .as_ref()
        .map_or(sqs.clone(), aws_sdk_sqs::Client::new);
    let queue = SqsQueue::new(queue_client, queue_url.clone(), Some(dlq_url.clone()));
    let app = App::new(config, store.clone());
    World {
        outbox: AwsOutbox::new(store.clone(), queue.clone(), app.clock.clone()),
        app,
        queue,
        sqs,
        queue_url,
        dlq_url,
        store,
    }
}

async fn subscribe(store: &DynamoStore, uri: &str) -> (String, String) {
    let filter = "/orgId/org-1/department/dep-1/message?direction=inbound";
    subscribe_to(store, uri, filter, 3_600_000).await
}

/// A subscription of org-1 to `filter`, expiring in `lifetime_ms`.
async fn subscribe_to(
    store: &DynamoStore,
    uri: &str,
    filter: &str,
    lifetime_ms: i64,
) -> (String, String) {
    let now = chrono::Utc::now().timestamp_millis();
    let (sub, _) = store
        .upsert_subscription(Upsert {
            org_id: "org-1".into(),
            uri: uri.into(),
            event_filters: vec![filter.into()],
            disabled_filters: vec![],
            expires_at: now + lifetime_ms,
            now,
            new_id: uuid::Uuid::now_v7().to_string().into(),
            new_secret: webhook_core::secret::new_signing_secret(),
            max_per_org: 100,
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
    (sub.id.to_string(), sub.secret)
}

/// Receives raw SQS messages as Lambda's event source mapping would hand them over.
pub(crate) async fn receive_as_event(
    w: &World,
    template: &str,
    wait: Duration,
) -> Option<SqsEvent> {
    let start = std::time::Instant::now();
    loop {
        let out = w
            .sqs
            .receive_message()
            .queue_url(&w.queue_url)
            // One at a time: a message received and not handed over would
            // stay invisible for the visibility timeout.
            .max_number_of_messages(1)
            .visibility_timeout(30)
            .wait_time_seconds(1)
            .message_system_attribute_names(
                aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
            )
            .send()
            .await
            .unwrap();
        if let Some(m) = out.messages().first() {
            return Some(serde_json::from_value(record_of(template, m)).unwrap());
        }
        if start.elapsed() > wait {
            return None;
        }
    }
}

/// Message `m` (received with its receive count) as the one record of an
/// event shaped like `template`, as Lambda's event source mapping hands it over.
fn record_of(template: &str, m: &aws_sdk_sqs::types::Message) -> Value {
    let mut event: Value = serde_json::from_str(template).unwrap();
    let record = &mut event["Records"][0];
    record["messageId"] = m.message_id().unwrap().into();
    record["receiptHandle"] = m.receipt_handle().unwrap().into();
    record["body"] = m.body().unwrap().into();
    record["attributes"]["ApproximateReceiveCount"] = m.attributes().unwrap()
        [&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount]
        .clone()
        .into();
    event
}

/// The dead-letter queue's messages (a two-second long poll).
pub(crate) async fn dead_letters(w: &World) -> Vec<aws_sdk_sqs::types::Message> {
    w.sqs
        .receive_message()
        .queue_url(&w.dlq_url)
        .wait_time_seconds(2)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default()
}

/// An events-queue batch: one record per `(record id, event id, carrier
/// message id)`, message events of org-1's department dep-1.
pub(crate) fn events_batch(events: &[(&str, &str, &str)]) -> SqsEvent {
    let sample: Value = serde_json::from_str(&sample_events::text("ingest-events-sqs")).unwrap();
    let records: Vec<Value> = events
        .iter()
        .map(|(record, event, carrier)| {
            let mut r = sample["Records"][0].clone();
            r["messageId"] = (*record).into();
            r["body"] = json!({
                "eventId": event, "type": "message.inbound", "organizationId": "org-1",
                "departmentId": "dep-1", "carrierMessageId": carrier, "status": "RECEIVED",
                "message": {"id": format!("msg-{event}"), "to": ["+15550100"], "from": "+15550199", "text": "hi"},
            })
            .to_string()
            .into();
            r
        })
        .collect();
    serde_json::from_value(json!({ "Records": records })).unwrap()
}

/// [`events_batch`] as SQS hands it over: each record carrying the time SQS
/// accepted it (`SentTimestamp`), the same on every redelivery.
fn timed_batch(events: &[(&str, &str, &str)], sent_at: i64) -> SqsEvent {
    let mut batch = events_batch(events);
    for record in &mut batch.records {
        record
            .attributes
            .insert("SentTimestamp".into(), sent_at.to_string());
    }
    batch
}

/// Every summary of `sub_id` (org-1), newest first.
async fn listed(w: &World, sub_id: &str) -> Vec<webhook_core::history::NotificationSummary> {
    use webhook_core::history::{DeliveryHistory, Window};
    let window = Window {
        statuses: vec![],
        since: 0,
        until: i64::MAX,
    };
    w.store
        .list(
            &OrgId::from("org-1"),
            &SubscriptionId::from(sub_id),
            &window,
            &webhook_core::page::PageRequest::first(100),
        )
        .await
        .unwrap()
        .content
}

/// A sample event of the events queue, its records sent by SQS just now
/// (`SentTimestamp`): dated by that, as a real record is, not recorded.
fn sent_now(sample: String) -> SqsEvent {
    let mut event: SqsEvent = serde_json::from_str(&sample).unwrap();
    let now = chrono::Utc::now().timestamp_millis().to_string();
    for record in &mut event.records {
        record
            .attributes
            .insert("SentTimestamp".into(), now.clone());
    }
    event
}

/// The jobs on the delivery queue, each received once (and kept
/// invisible), until a receive finds none.
pub(crate) async fn queued_jobs(w: &World) -> Vec<DeliveryJob> {
    let mut jobs = Vec::new();
    loop {
        let out = w
            .sqs
            .receive_message()
            .queue_url(&w.queue_url)
            .max_number_of_messages(10)
            .visibility_timeout(300)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        if out.messages().is_empty() {
            return jobs;
        }
        for m in out.messages() {
            jobs.push(serde_json::from_str(m.body().unwrap()).unwrap());
        }
    }
}

/// The notification ids on the delivery queue ([`queued_jobs`]).
async fn queued_ids(w: &World) -> Vec<String> {
    let jobs = queued_jobs(w).await;
    jobs.into_iter().map(|job| job.id.to_string()).collect()
}

fn failed_ids(response: &aws_lambda_events::event::sqs::SqsBatchResponse) -> Vec<&str> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect()
}
