//! A subscription's payload filter through the `ingest-events` function's handler
//! (`queues::ingest_events`) on DynamoDB Local and moto: an event the filter refuses puts
//! no message on the delivery queue and no item in the history; one it accepts does.

use aws_lambda_events::event::sqs::SqsEvent;
use serde_json::{json, Value};
use webhook_core::ids::{OrgId, SubscriptionId};
use webhook_core::lambda::queues;
use webhook_core::payload_filter::PayloadFilter;
use webhook_core::queue::DeliveryJob;
use webhook_core::store::{Store, Upsert};

use crate::lambda_queue_events::{queued_jobs, world, World};
use testkit::sample_events;

/// A subscription of org-1 to its department dep-1's inbound messages, with `filter`.
async fn subscribe(w: &World, uri: &str, filter: Option<Value>) -> String {
    let now = chrono::Utc::now().timestamp_millis();
    let (sub, _) = w
        .store
        .upsert_subscription(Upsert {
            org_id: "org-1".into(),
            uri: uri.into(),
            event_filters: vec!["/orgId/org-1/department/dep-1/message?direction=inbound".into()],
            disabled_filters: vec![],
            expires_at: now + 3_600_000,
            now,
            new_id: uuid::Uuid::now_v7().to_string().into(),
            new_secret: webhook_core::secret::new_signing_secret(),
            max_per_org: 100,
            ordered: None,
            rate_limit: None,
            role_arn: None,
            external_id: None,
            payload_filter: Some(filter.map(|f| PayloadFilter::parse(&f).unwrap())),
            retry_schedule: None,
            custom_headers: None,
        })
        .await
        .unwrap();
    sub.id.to_string()
}

/// An events-queue batch of inbound messages, one per `(event id, recipient)`.
fn batch(events: &[(&str, &str)]) -> SqsEvent {
    let sample: Value = serde_json::from_str(&sample_events::text("ingest-events-sqs")).unwrap();
    let records: Vec<Value> = events
        .iter()
        .map(|(event, to)| {
            let mut r = sample["Records"][0].clone();
            r["messageId"] = format!("record-{event}").into();
            r["body"] = json!({
                "eventId": event, "type": "message.inbound", "organizationId": "org-1",
                "departmentId": "dep-1", "status": "RECEIVED",
                "message": {"id": format!("msg-{event}"), "to": [to], "from": "+15550199", "text": "hi"},
            })
            .to_string()
            .into();
            r
        })
        .collect();
    serde_json::from_value(json!({ "Records": records })).unwrap()
}

/// The jobs on the delivery queue as (subscription, notification).
async fn queued(w: &World) -> Vec<(String, String)> {
    let jobs = queued_jobs(w).await;
    let pair = |job: DeliveryJob| (job.subscription_id.to_string(), job.id.to_string());
    jobs.into_iter().map(pair).collect()
}

/// The history items of `sub_id` (org-1).
async fn history(w: &World, sub_id: &str) -> usize {
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
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_events_creates_nothing_for_an_event_the_filter_refuses() {
    let w = world().await;
    let rx = testkit::Receiver::start(testkit::Handshake::Echo).await;
    let filtered = subscribe(
        &w,
        &rx.uri("/filtered"),
        Some(json!({"message.to": {"$prefix": "+1555000"}})),
    )
    .await;
    let plain = subscribe(&w, &rx.uri("/plain"), None).await;

    let events = [
        ("evt-pf-1", "+15550001"),
        ("evt-pf-2", "+449000"),
        ("evt-pf-3", "+15550009"),
    ];
    let response = queues::ingest_events(&w.app, &w.outbox, batch(&events)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    let mut jobs = queued(&w).await;
    jobs.sort();
    let id = |event: &str, sub: &str| {
        webhook_core::notification::notification_id(event, sub).to_string()
    };
    let mut expected = vec![
        (filtered.clone(), id("evt-pf-1", &filtered)),
        (filtered.clone(), id("evt-pf-3", &filtered)),
        (plain.clone(), id("evt-pf-1", &plain)),
        (plain.clone(), id("evt-pf-2", &plain)),
        (plain.clone(), id("evt-pf-3", &plain)),
    ];
    expected.sort();
    assert_eq!(
        jobs, expected,
        "no message for the refused event's filtered subscription"
    );
    assert_eq!(
        (history(&w, &filtered).await, history(&w, &plain).await),
        (2, 3)
    );
}

/// The fan-out lookup's cost, measured on DynamoDB Local (`ReturnConsumedCapacity`): one
/// `Query` of the filter's index entries, with or without payload filters, and the filters
/// ride on the entries it reads. Ten subscriptions, as the benchmark asks: with
/// 100-byte filters it reads what it reads without; at the 2048-byte limit it reads at most
/// ⌈10 × (entry + 2048) / 4 KB⌉ (docs/decisions/payload-filter.md, "Consequences").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fan_out_lookup_reads_the_filters_with_its_entries() {
    use webhook_core::aws::dynamodb::DynamoStore;
    use webhook_core::payload_filter::MAX_BYTES;

    const FILTER: &str = "/orgId/org-1/department/dep-1/message?direction=inbound";
    let mut measured = Vec::new();
    for size in [None, Some(100), Some(MAX_BYTES)] {
        let (client, tables) = testkit::dynamodb_local::fresh_tables("pf-cost").await;
        let store = DynamoStore::new(client.clone(), tables.clone());
        for i in 0..10 {
            let filter = size.map(|n| {
                // `{"message.text":{"$prefix":"…"}}` is 31 bytes around the prefix.
                PayloadFilter::parse(&json!({"message.text": {"$prefix": "x".repeat(n - 31)}}))
                    .unwrap()
            });
            let now = chrono::Utc::now().timestamp_millis();
            store
                .upsert_subscription(Upsert {
                    org_id: "org-1".into(),
                    uri: format!("https://receiver.example/hook/{i}"),
                    event_filters: vec![FILTER.into()],
                    disabled_filters: vec![],
                    expires_at: now + 3_600_000,
                    now,
                    new_id: uuid::Uuid::now_v7().to_string().into(),
                    new_secret: webhook_core::secret::new_signing_secret(),
                    max_per_org: 100,
                    ordered: None,
                    rate_limit: None,
                    role_arn: None,
                    external_id: None,
                    payload_filter: Some(filter),
                    retry_schedule: None,
                    custom_headers: None,
                })
                .await
                .unwrap();
        }
        let found = store.subscriptions_for_filter(FILTER).await.unwrap();
        assert_eq!(found.len(), 10);
        assert_eq!(
            found.iter().all(|s| s.payload_filter.is_some()),
            size.is_some(),
            "the entries carry the filters"
        );
        let out = client
            .query()
            .table_name(&tables.subscriptions)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(
                ":pk",
                aws_sdk_dynamodb::types::AttributeValue::S(format!("FILTER#{FILTER}")),
            )
            .consistent_read(true)
            .return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total)
            .send()
            .await
            .unwrap();
        assert_eq!(out.count(), 10);
        let rcu = out
            .consumed_capacity()
            .and_then(|c| c.capacity_units())
            .unwrap();
        println!("fan-out lookup, 10 subscriptions, filter {size:?} bytes: {rcu} RCU");
        measured.push(rcu);
    }
    assert_eq!(
        measured[1], measured[0],
        "100-byte filters read nothing more: {measured:?}"
    );
    let bound = (10.0 * (650.0 + MAX_BYTES as f64) / 4096.0_f64).ceil();
    assert!(measured[2] <= bound, "{measured:?} over {bound}");
}
