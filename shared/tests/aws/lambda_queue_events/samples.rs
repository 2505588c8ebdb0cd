//! The SQS and schedule sample events in `events/` (the files `cargo lambda invoke` is given,
//! `scripts/lambda-invoke.py`), each handed to its function's handler: ingested, delivered
//! with a retry, dead-lettered, refused record by record, and the expiry reminder.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_events_sample_stores_the_message_and_enqueues_its_notification() {
    let w = world().await;
    let (_rx, uri) = receiver().await;
    let (sub_id, _) = subscribe(&w.store, &uri).await;
    let sample: SqsEvent = serde_json::from_str(&sample_events::text("ingest-events-sqs")).unwrap();

    let response = queues::ingest_events(&w.app, &w.outbox, sample.clone()).await;
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(
        failed,
        ["22222222-2222-4222-8222-222222222222"],
        "only the invalid record fails"
    );

    let message = w
        .store
        .get_message(&OrgId::from("org-1"), "msg-sample-1", i64::MIN)
        .await
        .unwrap()
        .expect("message stored");
    assert_eq!(message.text, "Hello from a sample event");
    let delivery = receive_as_event(
        &w,
        &sample_events::text("deliver-notifications-sqs"),
        Duration::from_secs(5),
    )
    .await
    .expect("a job");
    let job: DeliveryJob =
        serde_json::from_str(delivery.records[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(job.subscription_id, sub_id);
    assert_eq!(
        job.id,
        webhook_core::notification::notification_id("evt-sample-1", &sub_id).to_string()
    );
    let payload: Value = serde_json::from_str(&job.body).unwrap();
    assert_eq!(payload["messageInfo"]["messageId"], "msg-sample-1");
    assert_eq!(
        payload["messageInfo"]["carrierMessageId"],
        "carrier-sample-1"
    );

    // SQS delivers at least once: the same event again changes nothing.
    let again = queues::ingest_events(&w.app, &w.outbox, sample).await;
    assert_eq!(again.batch_item_failures.len(), 1);
    assert!(receive_as_event(
        &w,
        &sample_events::text("deliver-notifications-sqs"),
        Duration::from_secs(2)
    )
    .await
    .is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliver_notifications_retries_with_a_delayed_message_then_delivers_signed() {
    let w = world().await;
    let (rx, uri) = receiver().await;
    let (sub_id, secret) = subscribe(&w.store, &uri).await;
    // The sample delivery record, for this subscription, put on the queue.
    let template = sample_events::text("deliver-notifications-sqs");
    let sample: SqsEvent = serde_json::from_str(&template).unwrap();
    let body = sample.records[0]
        .body
        .clone()
        .unwrap()
        .replace("SUBSCRIPTION_ID_PLACEHOLDER", &sub_id);
    w.sqs
        .send_message()
        .queue_url(&w.queue_url)
        .message_body(&body)
        .send()
        .await
        .unwrap();

    rx.script(&[(503, None)]);
    let first = receive_as_event(&w, &template, Duration::from_secs(5))
        .await
        .unwrap();
    let response = queues::deliver_notifications(&w.app, &w.queue, &w.outbox, first.clone()).await;
    // The retry is a new message sent with the retry delay (1s): the record
    // is done (Lambda deletes it), not held in flight for the wait.
    assert!(response.batch_item_failures.is_empty());
    let second = receive_as_event(&w, &template, Duration::from_secs(6))
        .await
        .expect("retried after the delay");
    assert_ne!(second.records[0].message_id, first.records[0].message_id);
    assert_eq!(second.records[0].attributes["ApproximateReceiveCount"], "1");
    let retried: DeliveryJob =
        serde_json::from_str(second.records[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(retried.attempts, 1, "the attempt made travels with the job");
    assert_eq!(
        retried.body,
        serde_json::from_str::<DeliveryJob>(&body).unwrap().body
    );
    let response = queues::deliver_notifications(&w.app, &w.queue, &w.outbox, second).await;
    assert!(response.batch_item_failures.is_empty());

    let posts = rx.received();
    assert_eq!(posts.len(), 2);
    let (headers, body) = (&posts[1].headers, &posts[1].body);
    standardwebhooks::Webhook::new(&secret)
        .unwrap()
        .verify(body, headers)
        .expect("signed");
    assert_eq!(
        headers["webhook-id"],
        "5d0c3f7e-6a55-5b44-9a3e-6a1f0f4f8e21"
    );
    let sub = w
        .store
        .get_subscription(&OrgId::from("org-1"), &SubscriptionId::from(&sub_id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (sub.status, sub.failing_since),
        (SubscriptionStatus::Active, None),
        "the success ends the failure streak"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliver_notifications_dead_letters_after_the_last_attempt() {
    let w = world().await;
    let (rx, uri) = receiver().await;
    let (sub_id, _) = subscribe(&w.store, &uri).await;
    let template = sample_events::text("deliver-notifications-sqs");
    let sample: SqsEvent = serde_json::from_str(&template).unwrap();
    let body = sample.records[0]
        .body
        .clone()
        .unwrap()
        .replace("SUBSCRIPTION_ID_PLACEHOLDER", &sub_id);
    w.sqs
        .send_message()
        .queue_url(&w.queue_url)
        .message_body(&body)
        .send()
        .await
        .unwrap();
    rx.script(&[(500, None), (500, None), (500, None)]);
    // Schedule "1s,1s": attempts 1 and 2 are retried, attempt 3 is the last.
    let mut event = receive_as_event(&w, &template, Duration::from_secs(5))
        .await
        .unwrap();
    event.records[0]
        .attributes
        .insert("ApproximateReceiveCount".into(), "3".into());
    let response = queues::deliver_notifications(&w.app, &w.queue, &w.outbox, event).await;
    assert!(
        response.batch_item_failures.is_empty(),
        "dead-lettered records are done with"
    );
    let dead = dead_letters(&w).await;
    assert_eq!(dead.len(), 1);
    let job: DeliveryJob = serde_json::from_str(dead[0].body().unwrap()).unwrap();
    assert_eq!(job.subscription_id, sub_id);
}

/// A log sink for one test's thread: what `ingest-events` logs.
#[derive(Clone, Default)]
struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The data checks on the AWS path: each invalid record fails (SQS retries
/// it, then its redrive policy moves it to the DLQ) with a log line naming
/// the field; `media: null` / `attachments: null` are empty lists.
#[tokio::test(flavor = "current_thread")]
async fn ingest_events_data_checks_fail_the_record_and_name_the_field() {
    let logs = Logs::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_writer(move || sink.clone())
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let w = world().await;
    let sample: SqsEvent =
        serde_json::from_str(&sample_events::text("ingest-events-sqs-data-checks")).unwrap();
    let response = queues::ingest_events(&w.app, &w.outbox, sample).await;
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(
        failed,
        [
            "33333333-3333-4333-8333-333333333333",
            "44444444-4444-4444-8444-444444444444",
            "66666666-6666-4666-8666-666666666666",
        ]
    );
    let org = OrgId::from("org-1");
    for refused in ["msg-dc-1", "msg-dc-2", "msg-dc-4"] {
        assert_eq!(
            w.store.get_message(&org, refused, i64::MIN).await.unwrap(),
            None
        );
    }
    let stored = w
        .store
        .get_message(&org, "msg-dc-3", i64::MIN)
        .await
        .unwrap()
        .expect("the valid record is stored");
    assert_eq!(stored.direction, "out", "derived from the event type");
    assert!(stored.media.is_empty() && stored.attachments.is_empty());

    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["fields"]["message"] == "event not ingested")
        .collect();
    let named: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["fields"]["sqs_message_id"].as_str().unwrap(),
                l["fields"]["fields"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        named,
        [
            ("33333333-3333-4333-8333-333333333333", "message.direction"),
            ("44444444-4444-4444-8444-444444444444", "message.time"),
            ("66666666-6666-4666-8666-666666666666", "message.media"),
        ],
        "{text}"
    );
    assert!(
        !text.contains("wrong direction"),
        "no event content in the logs"
    );
}

/// The schedule's sample event, handed to `remind-expiring`'s handler:
/// org-1's operational subscription is told, through the delivery queue and
/// `deliver-notifications`, that another of its subscriptions expires
/// within the notice; a second run tells nothing again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remind_expiring_sample_tells_the_organization_once() {
    let w = world().await;
    let (ops, ops_uri) = receiver().await;
    let day = 86_400_000;
    subscribe_to(
        &w.store,
        &ops_uri,
        "/orgId/org-1/subscription?type=expiring",
        30 * day,
    )
    .await;
    let (soon_id, _) = subscribe_to(
        &w.store,
        "https://soon.example/hook",
        &contact_filter(),
        day,
    )
    .await;
    subscribe_to(
        &w.store,
        "https://later.example/hook",
        &contact_filter(),
        30 * day,
    )
    .await;

    let scheduled = sample_events::json("remind-expiring-scheduled");
    let ran = schedule::remind_expiring(&w.app, &w.outbox, scheduled.clone())
        .await
        .unwrap();
    assert_eq!(ran, json!({"reminded": 1}));
    let template = sample_events::text("deliver-notifications-sqs");
    let event = receive_as_event(&w, &template, Duration::from_secs(5))
        .await
        .expect("the reminder is queued");
    let response = queues::deliver_notifications(&w.app, &w.queue, &w.outbox, event).await;
    assert!(response.batch_item_failures.is_empty());
    let got = ops.wait_for(1, Duration::from_secs(10)).await;
    let info = &got[0].json()["subscriptionInfo"];
    assert_eq!(info["type"], "subscription.expiring");
    assert_eq!(info["subscriptionId"], soon_id.as_str());

    let again = schedule::remind_expiring(&w.app, &w.outbox, scheduled)
        .await
        .unwrap();
    assert_eq!(again, json!({"reminded": 0}), "told once per expiry");
}

fn contact_filter() -> String {
    "/orgId/org-1/department/dep-1/contact".into()
}
