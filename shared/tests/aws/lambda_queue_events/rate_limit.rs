//! A subscription's rate limit kept by `deliver-notifications` across Lambda's batches
//! (issue 44).

use super::*;

/// Issue 44: a rate-limited subscription's notifications through
/// `deliver-notifications`, handed over in batches as Lambda's event source
/// does, reach the receiver within its rule (docs/api.md, "Behaviour"): at
/// 2 a second, no three requests within one second of the receiver's clock;
/// a batch's jobs past the slots within reach are deferred and come back
/// through SQS, every notification arriving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliver_notifications_keeps_a_rate_limit_across_batches() {
    let w = world().await;
    let (rx, uri) = receiver().await;
    let now = chrono::Utc::now().timestamp_millis();
    w.store
        .upsert_subscription(Upsert {
            org_id: "org-1".into(),
            uri,
            event_filters: vec!["/orgId/org-1/department/dep-1/message?direction=inbound".into()],
            disabled_filters: vec![],
            expires_at: now + 3_600_000,
            now,
            new_id: uuid::Uuid::now_v7().to_string().into(),
            new_secret: webhook_core::secret::new_signing_secret(),
            max_per_org: 100,
            ordered: None,
            rate_limit: Some(Some(2)),
            role_arn: None,
            external_id: None,
            payload_filter: None,
            retry_schedule: None,
            custom_headers: None,
        })
        .await
        .unwrap();
    let n = testkit::size::scaled(6, 20);
    let events: Vec<(String, String)> = (0..n)
        .map(|i| (format!("record-rated-{i}"), format!("evt-rated-{i}")))
        .collect();
    let batch: Vec<(&str, &str, &str)> = events
        .iter()
        .map(|(r, e)| (r.as_str(), e.as_str(), "carrier"))
        .collect();
    for chunk in batch.chunks(10) {
        let response = queues::ingest_events(&w.app, &w.outbox, events_batch(chunk)).await;
        assert_eq!(failed_ids(&response), Vec::<&str>::new());
    }

    let template = sample_events::text("deliver-notifications-sqs");
    let started = std::time::Instant::now();
    let bound = Duration::from_secs(30 + n as u64 * 2);
    let mut batches = 0;
    let unique = |rx: &Receiver| {
        let got = rx.arrived();
        got.iter().collect::<std::collections::HashSet<_>>().len()
    };
    while unique(&rx) < n && started.elapsed() < bound {
        let out = w
            .sqs
            .receive_message()
            .queue_url(&w.queue_url)
            .max_number_of_messages(10)
            .visibility_timeout(30)
            .wait_time_seconds(1)
            .message_system_attribute_names(
                aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
            )
            .send()
            .await
            .unwrap();
        let messages = out.messages();
        if messages.is_empty() {
            continue;
        }
        let records: Vec<Value> = messages
            .iter()
            .map(|m| record_of(&template, m)["Records"][0].clone())
            .collect();
        let mut event: Value = serde_json::from_str(&template).unwrap();
        event["Records"] = records.into();
        let event: SqsEvent = serde_json::from_value(event).unwrap();
        let response = queues::deliver_notifications(&w.app, &w.queue, &w.outbox, event).await;
        batches += 1;
        // The event source deletes what was not reported failed.
        let failed = failed_ids(&response);
        for m in messages {
            if !failed.contains(&m.message_id().unwrap()) {
                w.sqs
                    .delete_message()
                    .queue_url(&w.queue_url)
                    .receipt_handle(m.receipt_handle().unwrap())
                    .send()
                    .await
                    .unwrap();
            }
        }
    }
    assert_eq!(unique(&rx), n, "every notification arrives");
    let mut arrivals: Vec<std::time::Instant> = rx.received().iter().map(|r| r.arrived).collect();
    arrivals.sort();
    let spans: Vec<Duration> = arrivals.windows(3).map(|w| w[2] - w[0]).collect();
    eprintln!("{n} notifications in {batches} batches; spans of 3 arrivals: {spans:?}");
    assert!(
        spans.iter().all(|s| *s >= Duration::from_secs(1)),
        "three requests within one second at 2 a second: {spans:?}"
    );
}
