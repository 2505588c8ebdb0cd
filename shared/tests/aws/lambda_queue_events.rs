//! The SQS and schedule sample events in `events/`, fed to exactly the
//! handlers the `ingest-events`, `deliver-notifications` and
//! `remind-expiring` functions call, against DynamoDB Local and moto's SQS,
//! with a real callback receiver.

use crate::dynamodb_local;

use crate::sample_events;

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

/// DynamoDB Local stopped (`kill -STOP`: a stalled network, as seen from
/// here) until dropped, even when an assertion fails meanwhile.
struct Frozen(String);

impl Frozen {
    /// Stops the emulator whose pid is in `var` (set by the fault stage of
    /// ./scripts/test.sh) until dropped.
    fn emulator(var: &str) -> Frozen {
        let pid = std::env::var(var)
            .unwrap_or_else(|_| panic!("{var}: the fault stage of ./scripts/test.sh sets it"));
        signal(&pid, "-STOP");
        Frozen(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        signal(&self.0, "-CONT");
    }
}

/// An ingestion that fails after writing its history (the queue refuses the
/// jobs), then is retried: every notification is listed once, not once per try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partly_ingested_event_is_completed_by_its_retry_and_listed_once() {
    use webhook_core::history::{DeliveryHistory, Window};
    let w = world().await;
    let (_rx, uri) = receiver().await;
    let (sub_id, _) = subscribe(&w.store, &uri).await;
    let sample: SqsEvent = serde_json::from_str(&sample_events::text("ingest-events-sqs")).unwrap();
    let valid = "11111111-1111-4111-8111-111111111111";

    // The history is written, then the queue refuses: the record fails.
    let missing = format!("{}-missing", w.queue_url);
    let broken = AwsOutbox::new(
        w.store.clone(),
        SqsQueue::new(w.sqs.clone(), missing, None),
        w.app.clock.clone(),
    );
    let failed = queues::ingest_events(&w.app, &broken, sample.clone()).await;
    assert!(
        failed
            .batch_item_failures
            .iter()
            .any(|f| f.item_identifier == valid),
        "{:?}",
        failed.batch_item_failures
    );
    // A later try, on a working queue, completes it.
    tokio::time::sleep(Duration::from_millis(5)).await; // a later millisecond
    let retried = queues::ingest_events(&w.app, &w.outbox, sample).await;
    assert!(retried
        .batch_item_failures
        .iter()
        .all(|f| f.item_identifier != valid));

    let window = Window {
        statuses: vec![],
        since: 0,
        until: i64::MAX,
    };
    let page = w
        .store
        .list(
            &OrgId::from("org-1"),
            &SubscriptionId::from(sub_id.as_str()),
            &window,
            &webhook_core::page::PageRequest::first(100),
        )
        .await
        .unwrap();
    assert_eq!(page.total_elements, 1, "listed once: {:?}", page.content);
    let id = webhook_core::notification::notification_id("evt-sample-1", &sub_id).to_string();
    assert_eq!(page.content[0].id, id);
    let delivery = receive_as_event(
        &w,
        &sample_events::text("deliver-notifications-sqs"),
        Duration::from_secs(5),
    )
    .await
    .expect("its job");
    let job: DeliveryJob =
        serde_json::from_str(delivery.records[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(
        job.created_at, page.content[0].created_at,
        "the job names the history item it updates"
    );
    let payload: serde_json::Value = serde_json::from_str(&job.body).unwrap();
    assert_eq!(
        payload["timestamp"], job.created_at,
        "the payload is dated by the first acceptance too, as the history is"
    );
}

fn signal(pid: &str, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, pid])
        .status()
        .expect("kill");
    assert!(ok.success(), "kill {sig} {pid}");
}

/// Runs `f` with an emulator frozen; how long it took. Gives up (and fails)
/// well after `bound`, so a lost bound cannot hang the suite.
async fn while_frozen<T>(
    pid_var: &str,
    bound: Duration,
    f: impl std::future::Future<Output = T>,
) -> (T, Duration) {
    let _frozen = Frozen::emulator(pid_var);
    let started = std::time::Instant::now();
    let out = tokio::time::timeout(bound * 3, f)
        .await
        .unwrap_or_else(|_| panic!("no answer within {:?}", bound * 3));
    (out, started.elapsed())
}

/// The ingest sample handed to `ingest-events` with an emulator frozen: it
/// answers within `bound` with every record reported failed; handed over
/// again after the thaw (as SQS redelivers it), only the invalid record fails.
async fn ingest_while_frozen(
    w: &World,
    pid_var: &str,
    what: &str,
    sample: SqsEvent,
    bound: Duration,
) {
    let (frozen, took) = while_frozen(
        pid_var,
        bound,
        queues::ingest_events(&w.app, &w.outbox, sample.clone()),
    )
    .await;
    println!(
        "ingest-events with {what} frozen: answered in {took:?}, {} of {} records failed",
        frozen.batch_item_failures.len(),
        sample.records.len()
    );
    assert!(took < bound, "ingest batch took {took:?} (bound {bound:?})");
    assert_eq!(
        frozen.batch_item_failures.len(),
        sample.records.len(),
        "every record is redelivered"
    );
    let again = queues::ingest_events(&w.app, &w.outbox, sample).await;
    assert_eq!(
        again.batch_item_failures.len(),
        1,
        "only the invalid record fails"
    );
}

/// Issue 14, the Lambda path: with DynamoDB frozen, each queue function's
/// batch answers inside its call bounds and reports its records failed (SQS
/// redelivers them), instead of running out the function's timeout; once
/// DynamoDB is back, the redelivered records go through and nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "freezes the emulators: ./scripts/test.sh --full runs it alone, last"]
async fn queue_batches_fail_fast_while_dynamodb_is_frozen_and_recover() {
    let bounds = webhook_core::call_bounds::AwsCalls::default().batch;
    let w = world_on(Some(
        webhook_core::aws::sdk_config_with(&bounds, webhook_core::aws::Roots::Amazon).await,
    ))
    .await;
    let (rx, uri) = receiver().await;
    subscribe(&w.store, &uri).await;
    // As SQS hands them over: each record carrying its time (issue 39).
    let sample = sent_now(sample_events::text("ingest-events-sqs"));
    // Warm the clients (connections, credentials) before the fault.
    w.store
        .get_message(&OrgId::from("org-1"), "none", i64::MIN)
        .await
        .unwrap();
    let bound = bounds.operation + Duration::from_secs(2);

    ingest_while_frozen(&w, "DYNAMODB_LOCAL_PID", "DynamoDB", sample, bound).await;
    let delivery = receive_as_event(
        &w,
        &sample_events::text("deliver-notifications-sqs"),
        Duration::from_secs(5),
    )
    .await
    .expect("a job");

    let (frozen, took) = while_frozen(
        "DYNAMODB_LOCAL_PID",
        bound,
        queues::deliver_notifications(&w.app, &w.queue, &w.outbox, delivery.clone()),
    )
    .await;
    println!(
        "deliver-notifications with DynamoDB frozen: answered in {took:?}, {} of 1 records failed",
        frozen.batch_item_failures.len()
    );
    assert!(
        took < bound,
        "delivery batch took {took:?} (bound {bound:?})"
    );
    // The retry is the job sent again with a delay (not held in flight):
    // the record is done, and the job comes back on the queue.
    assert!(frozen.batch_item_failures.is_empty());
    assert_eq!(
        rx.count(),
        0,
        "nothing was sent without the subscription read"
    );
    let retried = receive_as_event(
        &w,
        &sample_events::text("deliver-notifications-sqs"),
        Duration::from_secs(15),
    )
    .await
    .expect("the job is sent again");
    assert_eq!(
        retried.records[0].body,
        delivery.records[0].body.as_ref().map(|b| {
            let mut job: DeliveryJob = serde_json::from_str(b).unwrap();
            job.attempts = 1;
            serde_json::to_string(&job).unwrap()
        })
    );

    let delivered = queues::deliver_notifications(&w.app, &w.queue, &w.outbox, retried).await;
    assert!(delivered.batch_item_failures.is_empty());
    assert_eq!(rx.count(), 1, "delivered once DynamoDB is back");
}

/// Issue 14, the Lambda ingest path with SQS frozen: the ingest batch writes
/// to DynamoDB but cannot hand its notifications to the delivery queue; it
/// answers inside its call bounds with its records failed, and the
/// redelivered batch goes through once SQS is back (ingestion is idempotent
/// per event id, so nothing is doubled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "freezes the emulators: ./scripts/test.sh --full runs it alone, last"]
async fn ingest_batches_fail_fast_while_sqs_is_frozen_and_recover() {
    let bounds = webhook_core::call_bounds::AwsCalls::default().batch;
    let w = world_on(Some(
        webhook_core::aws::sdk_config_with(&bounds, webhook_core::aws::Roots::Amazon).await,
    ))
    .await;
    let (rx, uri) = receiver().await;
    subscribe(&w.store, &uri).await;
    // As SQS hands them over: each record carrying its time (issue 39).
    let sample = sent_now(sample_events::text("ingest-events-sqs"));
    let bound = bounds.operation + Duration::from_secs(2);

    ingest_while_frozen(&w, "MOTO_PID", "SQS", sample, bound).await;
    // A send that timed out may still have reached SQS (here: the frozen
    // moto reads every attempt's request when continued), so the job can be
    // there once per attempt plus the redelivered batch's: duplicates carry
    // the same uuid (webhook-id).
    let mut jobs = 0;
    while let Some(delivery) = receive_as_event(
        &w,
        &sample_events::text("deliver-notifications-sqs"),
        Duration::from_secs(if jobs == 0 { 5 } else { 2 }),
    )
    .await
    {
        let delivered = queues::deliver_notifications(&w.app, &w.queue, &w.outbox, delivery).await;
        assert!(delivered.batch_item_failures.is_empty());
        jobs += 1;
    }
    let got = rx.received();
    let ids: std::collections::HashSet<&str> = got.iter().map(|r| r.header("webhook-id")).collect();
    println!(
        "ingest-events after SQS is back: {jobs} delivery jobs, {} notifications received, {} duplicates",
        got.len(),
        got.len() - ids.len()
    );
    let most = bounds.max_attempts as usize + 1;
    assert!(
        (1..=most).contains(&jobs),
        "{jobs} jobs for one notification (at most {most})"
    );
    assert_eq!(got.len(), jobs, "each job delivered");
    assert_eq!(ids.len(), 1, "one notification, whatever the duplicates");
}

/// Each queue function writes one CloudWatch EMF line per invocation, and
/// an event's `traceparent` message attribute reaches the callback (issue 23).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_functions_write_one_emf_line_per_invocation_and_carry_the_trace() {
    use webhook_core::telemetry::emf;
    let w = world().await;
    let (rx, uri) = receiver().await;
    subscribe(&w.store, &uri).await;
    let mut sample: SqsEvent =
        serde_json::from_str(&sample_events::text("ingest-events-sqs")).unwrap();
    let records = sample.records.len() as u64;
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    for record in &mut sample.records {
        record.message_attributes.insert(
            "traceparent".into(),
            serde_json::from_value(
                json!({"stringValue": format!("00-{trace_id}-00f067aa0ba902b7-01"),
                                          "dataType": "String"}),
            )
            .unwrap(),
        );
    }

    let (_, lines) = emf::capture(queues::ingest_events(&w.app, &w.outbox, sample)).await;
    println!("ingest-events EMF: {lines:?}");
    assert_eq!(lines.len(), 1, "one line per invocation");
    let line: Value = serde_json::from_str(&lines[0]).unwrap();
    let directive = &line["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(directive["Namespace"], "Webhooks");
    assert_eq!(directive["Dimensions"], serde_json::json!([["Function"]]));
    assert!(line["_aws"]["Timestamp"].as_i64().unwrap() > 0);
    assert_eq!(line["Function"], "ingest-events");
    assert_eq!(line["Records"], records);
    assert_eq!(line["RecordsFailed"], 1, "the invalid record");
    assert_eq!(line["EventsIngested"], records - 1);
    assert_eq!(line["NotificationsCreated"], 1);
    assert_eq!(line["DuplicateEvents"], 0);

    let delivery = receive_as_event(
        &w,
        &sample_events::text("deliver-notifications-sqs"),
        Duration::from_secs(5),
    )
    .await
    .expect("a job");
    let (response, lines) = emf::capture(queues::deliver_notifications(
        &w.app, &w.queue, &w.outbox, delivery,
    ))
    .await;
    assert!(response.batch_item_failures.is_empty());
    let posts = rx.received();
    assert_eq!(posts.len(), 1);
    let traceparent = posts[0].headers["traceparent"].to_str().unwrap();
    assert_eq!(&traceparent[3..35], trace_id, "{traceparent}");
    println!("deliver-notifications EMF: {lines:?}");
    assert_eq!(lines.len(), 1, "one line per invocation");
    let line: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(line["Function"], "deliver-notifications");
    let declared: Vec<&str> = line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Name"].as_str().unwrap())
        .collect();
    for name in [
        "Records",
        "DeliveryAttempts",
        "Attempts.delivered",
        "Attempts.retry",
        "Attempts.dead",
        "Attempts.deferred",
        "RecordsUnsettled",
        "AttemptDuration",
        "DeliveryLag",
    ] {
        assert!(
            declared.contains(&name),
            "{name} not declared: {declared:?}"
        );
    }
    assert_eq!(
        (&line["Records"], &line["DeliveryAttempts"]),
        (&Value::from(1), &Value::from(1))
    );
    assert_eq!(line["Attempts.delivered"], 1);
    assert_eq!(line["Attempts.retry"], 0);
    assert_eq!(line["RecordsUnsettled"], 0);
    assert_eq!(line["AttemptDuration"].as_array().unwrap().len(), 1);
    assert_eq!(line["DeliveryLag"].as_array().unwrap().len(), 1);
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

/// The outbox's SQS client as the test sees it: the size of each
/// `SendMessageBatch` it sends, and entries to have moto refuse (a body
/// holding `refuse` gets a delay over SQS's 15 minutes, which moto refuses
/// for that entry alone, as SQS does).
#[derive(Debug, Clone, Default)]
struct Sends {
    batches: Arc<std::sync::Mutex<Vec<usize>>>,
    refuse: Arc<std::sync::Mutex<Option<String>>>,
}

impl aws_sdk_sqs::config::Intercept for Sends {
    fn name(&self) -> &'static str {
        "Sends"
    }

    fn modify_before_serialization(
        &self,
        context: &mut aws_sdk_sqs::config::interceptors::BeforeSerializationInterceptorContextMut<
            '_,
        >,
        _: &aws_sdk_sqs::config::RuntimeComponents,
        _: &mut aws_sdk_sqs::config::ConfigBag,
    ) -> Result<(), aws_sdk_sqs::error::BoxError> {
        use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchInput;
        let Some(input) = context.input_mut().downcast_mut::<SendMessageBatchInput>() else {
            return Ok(());
        };
        let entries = input.entries.get_or_insert_with(Vec::new);
        self.batches.lock().unwrap().push(entries.len());
        if let Some(marker) = self.refuse.lock().unwrap().as_deref() {
            for entry in entries.iter_mut() {
                if entry.message_body.contains(marker) {
                    entry.delay_seconds = Some(901);
                }
            }
        }
        Ok(())
    }
}

impl Sends {
    fn take(&self) -> Vec<usize> {
        std::mem::take(&mut self.batches.lock().unwrap())
    }
}

/// The world's outbox on an SQS client that `Sends` watches.
fn watched_outbox(w: &World) -> (AwsOutbox, Sends) {
    let sends = Sends::default();
    let config = w
        .sqs
        .config()
        .to_builder()
        .interceptor(sends.clone())
        .build();
    let client = aws_sdk_sqs::Client::from_conf(config);
    let queue = SqsQueue::new(client, w.queue_url.clone(), Some(w.dlq_url.clone()));
    let outbox = AwsOutbox::new(w.store.clone(), queue, w.app.clock.clone());
    (outbox, sends)
}

/// An events-queue batch: one record per `(record id, event id, carrier
/// message id)`, message events of org-1's department dep-1.
fn events_batch(events: &[(&str, &str, &str)]) -> SqsEvent {
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

/// Issue 39: an event of the events queue carries its time, so it has no
/// event record. SQS redelivering it after its first try finished sends
/// each notification again, under the same uuid and with the same bytes;
/// the history lists each once, the repeat as a further attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_event_redelivered_is_sent_again_under_its_uuid_and_listed_once() {
    use webhook_core::history::{DeliveryHistory, NotificationStatus};
    let w = world().await;
    let (rx, uri) = receiver().await;
    let (sub_id, _) = subscribe(&w.store, &uri).await;
    let sent = chrono::Utc::now().timestamp_millis();
    let events = ["evt-redelivered-1", "evt-redelivered-2"];
    let batch = timed_batch(
        &[
            ("record-1", events[0], "carrier-1"),
            ("record-2", events[1], "carrier-2"),
        ],
        sent,
    );
    let template = sample_events::text("deliver-notifications-sqs");
    // The first try, delivered; then SQS hands the same batch over again.
    for round in 1..=2 {
        let mut batch = batch.clone();
        for record in &mut batch.records {
            record
                .attributes
                .insert("ApproximateReceiveCount".into(), round.to_string());
        }
        let response = queues::ingest_events(&w.app, &w.outbox, batch).await;
        assert_eq!(failed_ids(&response), Vec::<&str>::new(), "round {round}");
        for _ in &events {
            let job = receive_as_event(&w, &template, Duration::from_secs(5))
                .await
                .expect("a job");
            let done = queues::deliver_notifications(&w.app, &w.queue, &w.outbox, job).await;
            assert!(done.batch_item_failures.is_empty(), "round {round}");
        }
        rx.wait_for(events.len() * round, Duration::from_secs(10))
            .await;
    }

    let mut expected: Vec<String> = events
        .iter()
        .map(|e| webhook_core::notification::notification_id_at(e, &sub_id, sent).to_string())
        .collect();
    expected.sort();
    let received = rx.received();
    let mut ids: Vec<&str> = received.iter().map(|r| r.header("webhook-id")).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids, expected, "the same uuids both times");
    for id in &expected {
        let copies: Vec<&[u8]> = received
            .iter()
            .filter(|r| r.header("webhook-id") == id)
            .map(|r| r.body.as_slice())
            .collect();
        assert_eq!(copies.len(), 2, "{id}: sent once per try");
        assert_eq!(copies[0], copies[1], "{id}: the same bytes");
    }

    let summaries = listed(&w, &sub_id).await;
    let mut listed_ids: Vec<String> = summaries.iter().map(|s| s.id.to_string()).collect();
    listed_ids.sort();
    assert_eq!(listed_ids, expected, "each listed once");
    for summary in &summaries {
        assert_eq!(
            (summary.status, summary.attempts, summary.created_at),
            (NotificationStatus::Delivered, 2, sent),
            "{}: the redelivery is a further attempt",
            summary.id
        );
        let detail = w
            .store
            .get(
                &OrgId::from("org-1"),
                &SubscriptionId::from(sub_id.as_str()),
                &summary.id,
            )
            .await
            .unwrap()
            .expect("found by its uuid alone");
        assert_eq!(detail.attempts.len(), 2);
        let sent_body = received
            .iter()
            .find(|r| r.header("webhook-id") == summary.id.as_str())
            .unwrap();
        assert_eq!(
            detail.payload.as_bytes(),
            sent_body.body,
            "the payload as sent"
        );
    }
}

/// Issue 39: a try of an event carrying its time that fails after writing
/// its history (the queue refuses the jobs) leaves no record; its
/// redelivery completes it under the same ids, each notification listed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_try_of_a_timed_event_is_completed_by_its_redelivery_and_listed_once() {
    let w = world().await;
    let (_rx, uri) = receiver().await;
    let (sub_id, _) = subscribe(&w.store, &uri).await;
    let sent = chrono::Utc::now().timestamp_millis();
    let batch = timed_batch(&[("record-1", "evt-timed-retry", "carrier-1")], sent);
    let broken = AwsOutbox::new(
        w.store.clone(),
        SqsQueue::new(w.sqs.clone(), format!("{}-missing", w.queue_url), None),
        w.app.clock.clone(),
    );
    let failed = queues::ingest_events(&w.app, &broken, batch.clone()).await;
    assert_eq!(failed_ids(&failed), ["record-1"]);
    assert_eq!(
        listed(&w, &sub_id).await.len(),
        1,
        "the history is written first"
    );

    let retried = queues::ingest_events(&w.app, &w.outbox, batch).await;
    assert_eq!(failed_ids(&retried), Vec::<&str>::new());
    let id = webhook_core::notification::notification_id_at("evt-timed-retry", &sub_id, sent)
        .to_string();
    assert_eq!(queued_ids(&w).await, std::slice::from_ref(&id));
    let summaries = listed(&w, &sub_id).await;
    assert_eq!(summaries.len(), 1, "listed once: {summaries:?}");
    assert_eq!(
        (summaries[0].id.as_str(), summaries[0].created_at),
        (id.as_str(), sent)
    );
}

/// Issue 39, the upgrade: an event whose first try ran on the version that
/// recorded every event, redelivered to this one, honours the record it
/// left: a finished event is a duplicate, a failed try is completed under
/// the id and time it gave (UUIDv5, its first acceptance).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivery_honours_the_record_of_the_version_before() {
    use webhook_core::aws::dynamodb::events::EventRecord;
    let w = world().await;
    let (_rx, uri) = receiver().await;
    let (sub_id, _) = subscribe(&w.store, &uri).await;
    let org = OrgId::from("org-1");
    let now = chrono::Utc::now().timestamp_millis();
    let expires = now / 1000 + 86_400;
    w.store
        .record_event(&org, "evt-upgrade-done", expires)
        .await
        .unwrap();
    let first_try = now - 30_000;
    w.store
        .record_partial_event(&org, "evt-upgrade-partial", first_try, expires)
        .await
        .unwrap();
    let mut batch = timed_batch(
        &[
            ("record-done", "evt-upgrade-done", "carrier-1"),
            ("record-partial", "evt-upgrade-partial", "carrier-2"),
        ],
        now - 20_000,
    );
    for record in &mut batch.records {
        record
            .attributes
            .insert("ApproximateReceiveCount".into(), "2".into());
    }
    let response = queues::ingest_events(&w.app, &w.outbox, batch).await;
    assert_eq!(failed_ids(&response), Vec::<&str>::new());
    let id = webhook_core::notification::notification_id("evt-upgrade-partial", &sub_id);
    assert_eq!(
        queued_ids(&w).await,
        [id.to_string()],
        "the finished one is not sent"
    );
    let summaries = listed(&w, &sub_id).await;
    assert_eq!(summaries.len(), 1);
    assert_eq!(
        (summaries[0].id.as_str(), summaries[0].created_at),
        (id.to_string().as_str(), first_try)
    );
    assert_eq!(
        w.store
            .event_record(&org, "evt-upgrade-partial")
            .await
            .unwrap(),
        EventRecord::Done
    );
}

/// Issue 39: a producer that sends the same event twice (two messages of the
/// events queue, accepted at different times) with its `occurredAt` gets
/// one notification: sent twice under one uuid, listed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_sent_twice_with_its_occurrence_is_one_notification() {
    let w = world().await;
    let (_rx, uri) = receiver().await;
    let (sub_id, _) = subscribe(&w.store, &uri).await;
    let occurred = chrono::Utc::now().timestamp_millis() - 1_000;
    let sent_at = |sent: i64| {
        let mut batch = timed_batch(&[("record", "evt-sent-twice", "carrier")], sent);
        let body = batch.records[0].body.as_deref().unwrap();
        let mut body: Value = serde_json::from_str(body).unwrap();
        body["occurredAt"] = occurred.into();
        batch.records[0].body = Some(body.to_string());
        batch
    };
    for sent in [occurred + 5, occurred + 900] {
        let response = queues::ingest_events(&w.app, &w.outbox, sent_at(sent)).await;
        assert_eq!(failed_ids(&response), Vec::<&str>::new());
    }
    let id = webhook_core::notification::notification_id_at("evt-sent-twice", &sub_id, occurred)
        .to_string();
    assert_eq!(queued_ids(&w).await, [id.as_str(), id.as_str()]);
    let summaries = listed(&w, &sub_id).await;
    assert_eq!(summaries.len(), 1, "listed once: {summaries:?}");
    assert_eq!(summaries[0].id, id);
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

/// The notification ids on the delivery queue, each received once (and
/// kept invisible), until a receive finds none.
async fn queued_ids(w: &World) -> Vec<String> {
    let mut ids = Vec::new();
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
            return ids;
        }
        for m in out.messages() {
            let job: DeliveryJob = serde_json::from_str(m.body().unwrap()).unwrap();
            ids.push(job.id.to_string());
        }
    }
}

fn failed_ids(response: &aws_lambda_events::event::sqs::SqsBatchResponse) -> Vec<&str> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect()
}

/// Issue 24: the jobs of a whole ingest batch share `SendMessageBatch`
/// calls (7 events × 3 subscriptions = 21 jobs: 3 calls, not 7); an event
/// id repeated in the batch is a duplicate; the batch redelivered sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ingest_batch_sends_its_jobs_together_and_once() {
    let w = world().await;
    let (_rx, uri) = receiver().await;
    let mut subscriptions = Vec::new();
    for i in 0..3 {
        subscriptions.push(subscribe(&w.store, &format!("{uri}/{i}")).await.0);
    }
    let (outbox, sends) = watched_outbox(&w);
    let mut events: Vec<(String, String)> = (0..7)
        .map(|i| (format!("record-{i}"), format!("evt-batch-{i}")))
        .collect();
    // The producer sent event 2 twice.
    events.push(("record-again".into(), "evt-batch-2".into()));
    let batch: Vec<(&str, &str, &str)> = events
        .iter()
        .map(|(r, e)| (r.as_str(), e.as_str(), "carrier"))
        .collect();
    let batch = events_batch(&batch);

    let response = queues::ingest_events(&w.app, &outbox, batch.clone()).await;
    assert_eq!(failed_ids(&response), Vec::<&str>::new());
    assert_eq!(sends.take(), [10, 10, 1], "21 jobs in 3 calls");
    let mut expected: Vec<String> = (0..7)
        .flat_map(|i| {
            let event = format!("evt-batch-{i}");
            subscriptions
                .iter()
                .map(move |s| webhook_core::notification::notification_id(&event, s).to_string())
        })
        .collect();
    expected.sort();
    let mut queued = queued_ids(&w).await;
    queued.sort();
    assert_eq!(queued, expected, "every notification once");

    let again = queues::ingest_events(&w.app, &outbox, batch).await;
    assert_eq!(failed_ids(&again), Vec::<&str>::new());
    assert_eq!(
        sends.take(),
        Vec::<usize>::new(),
        "a redelivery sends nothing"
    );
    assert!(receive_as_event(
        &w,
        &sample_events::text("deliver-notifications-sqs"),
        Duration::from_secs(1)
    )
    .await
    .is_none());
}

/// Issue 24: an entry SQS refuses fails only its own event's record; the
/// others are committed, and the refused event's redelivery completes it
/// with the same notification id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_entry_fails_only_its_own_event() {
    let w = world().await;
    let (_rx, uri) = receiver().await;
    let (sub_id, _) = subscribe(&w.store, &uri).await;
    let (outbox, sends) = watched_outbox(&w);
    *sends.refuse.lock().unwrap() = Some("carrier-refused".into());
    let batch = events_batch(&[
        ("record-a", "evt-refuse-a", "carrier-a"),
        ("record-b", "evt-refuse-b", "carrier-refused"),
        ("record-c", "evt-refuse-c", "carrier-c"),
    ]);

    let response = queues::ingest_events(&w.app, &outbox, batch.clone()).await;
    assert_eq!(failed_ids(&response), ["record-b"]);
    assert_eq!(sends.take(), [3], "one call for the three jobs");
    let id = |event: &str| webhook_core::notification::notification_id(event, &sub_id).to_string();
    let mut queued = queued_ids(&w).await;
    queued.sort();
    let mut expected = vec![id("evt-refuse-a"), id("evt-refuse-c")];
    expected.sort();
    assert_eq!(queued, expected);

    // SQS redelivers the failed record alone; this time its entry is taken.
    *sends.refuse.lock().unwrap() = None;
    let mut redelivered = batch.clone();
    redelivered
        .records
        .retain(|r| r.message_id.as_deref() == Some("record-b"));
    let again = queues::ingest_events(&w.app, &outbox, redelivered).await;
    assert_eq!(failed_ids(&again), Vec::<&str>::new());
    assert_eq!(queued_ids(&w).await, [id("evt-refuse-b")]);
    // The whole batch again: every event is recorded, nothing is sent.
    let all = queues::ingest_events(&w.app, &outbox, batch).await;
    assert_eq!(failed_ids(&all), Vec::<&str>::new());
    assert_eq!(sends.take(), [1], "only the redelivery's call");
}

/// An ordered subscription of org-1 on its own FIFO queue and FIFO DLQ
/// (the queue, the outbox and the functions' view of them), retrying on
/// `schedule`.
struct Line {
    w: World,
    queue: SqsQueue,
    outbox: AwsOutbox,
    name: String,
    fifo_url: String,
    fifo_dlq: String,
    sub_id: String,
    rx: Receiver,
}

async fn line(schedule: Vec<Duration>) -> Line {
    let mut w = world().await;
    w.app.config.retry_schedule = schedule;
    let name = format!("ordered-{}", uuid::Uuid::new_v4().simple());
    let fifo = |name: String| {
        let sqs = w.sqs.clone();
        async move {
            sqs.create_queue()
                .queue_name(name)
                .attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true")
                .send()
                .await
                .unwrap()
                .queue_url()
                .unwrap()
                .to_owned()
        }
    };
    let fifo_dlq = fifo(format!("{name}-dlq.fifo")).await;
    let fifo_url = fifo(format!("{name}.fifo")).await;
    let queue = w
        .queue
        .clone()
        .with_ordered(&fifo_url, Some(fifo_dlq.clone()));
    let outbox = AwsOutbox::new(w.store.clone(), queue.clone(), w.app.clock.clone());
    let (rx, uri) = receiver().await;
    let now = chrono::Utc::now().timestamp_millis();
    let (sub, _) = w
        .store
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
            ordered: Some(true),
            rate_limit: None,
            role_arn: None,
            external_id: None,
            payload_filter: None,
        })
        .await
        .unwrap();
    Line {
        sub_id: sub.id.to_string(),
        w,
        queue,
        outbox,
        name,
        fifo_url,
        fifo_dlq,
        rx,
    }
}

impl Line {
    /// Lambda's FIFO mapping until the receiver has `attempts` POSTs or
    /// `limit` passes: one record a batch, deleted when not reported failed.
    /// How many records were reported failed (kept in their line).
    async fn run(&self, attempts: usize, limit: Duration) -> usize {
        let template = sample_events::text("deliver-notifications-sqs");
        let started = std::time::Instant::now();
        let mut retried_records = 0;
        while self.rx.count() < attempts && started.elapsed() < limit {
            let Some((m, event)) = self.receive(&template).await else {
                continue;
            };
            let response =
                queues::deliver_notifications(&self.w.app, &self.queue, &self.outbox, event).await;
            if response.batch_item_failures.is_empty() {
                self.w
                    .sqs
                    .delete_message()
                    .queue_url(&self.fifo_url)
                    .receipt_handle(m.receipt_handle().unwrap())
                    .send()
                    .await
                    .unwrap();
            } else {
                retried_records += 1;
            }
        }
        retried_records
    }

    /// One message of the FIFO queue (a second's long poll) as the record
    /// of a one-record batch.
    async fn receive(&self, template: &str) -> Option<(aws_sdk_sqs::types::Message, SqsEvent)> {
        let out = self
            .w
            .sqs
            .receive_message()
            .queue_url(&self.fifo_url)
            .max_number_of_messages(1)
            .visibility_timeout(30)
            .wait_time_seconds(1)
            .message_system_attribute_names(
                aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
            )
            .send()
            .await
            .unwrap();
        let m = out.messages().first()?.clone();
        let mut event = record_of(template, &m);
        event["Records"][0]["eventSourceARN"] =
            format!("arn:aws:sqs:us-east-1:123456789012:{}.fifo", self.name).into();
        Some((m, serde_json::from_value(event).unwrap()))
    }

    /// Ingests events `ids` (in batches of 10, as ingest-events gets them).
    async fn ingest(&self, ids: &[String]) {
        for chunk in ids.chunks(10) {
            let records: Vec<(String, &str)> = chunk
                .iter()
                .map(|e| (format!("record-{e}"), e.as_str()))
                .collect();
            let batch: Vec<(&str, &str, &str)> = records
                .iter()
                .map(|(r, e)| (r.as_str(), *e, "carrier"))
                .collect();
            let response =
                queues::ingest_events(&self.w.app, &self.outbox, events_batch(&batch)).await;
            assert_eq!(failed_ids(&response), Vec::<&str>::new());
        }
    }

    /// The uuids of the POSTs received, in arrival order.
    fn arrivals(&self) -> Vec<String> {
        self.rx
            .received()
            .iter()
            .map(|a| a.headers["webhook-id"].to_str().unwrap().to_owned())
            .collect()
    }

    fn uuid(&self, event: &str) -> String {
        webhook_core::notification::notification_id(event, &self.sub_id).to_string()
    }
}

/// A retry holds its line on Lambda: while the head of the line waits for
/// its retry (a second, its visibility), the notifications after it are
/// not even received, so they arrive after its retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordered_retry_holds_its_line_on_lambda() {
    let l = line(vec![Duration::from_secs(1)]).await;
    l.rx.script(&[(400, None), (200, None), (200, None), (200, None)]);
    let ids: Vec<String> = (0..3).map(|i| format!("evt-held-{i}")).collect();
    l.ingest(&ids).await;
    let retried = l.run(4, Duration::from_secs(20)).await;
    let (a, b, c) = (l.uuid(&ids[0]), l.uuid(&ids[1]), l.uuid(&ids[2]));
    assert_eq!(l.arrivals(), [a.clone(), a, b, c]);
    assert_eq!(
        retried, 1,
        "the retry was a record reported failed, kept in its line"
    );
    let posts = l.rx.received();
    assert!(
        posts[1].at.duration_since(posts[0].at) >= Duration::from_millis(900),
        "the retry waited its second"
    );
}

/// Ordered delivery on Lambda (issue 36): an ordered subscription's jobs go
/// to the FIFO queue, and `deliver-notifications`, fed one record at a time
/// as the FIFO mapping's batch size of 1 does, delivers them in acceptance
/// order with failures injected at random: a retry keeps its message in its
/// line (its visibility, the record reported failed so Lambda leaves it),
/// each attempt numbered from the history, and a notification that fails
/// every attempt goes to the FIFO dead-letter queue and lets the next one
/// go. None lost, and a notification seen again only right after itself
/// (same uuid). 100 notifications on every commit, 1,000 in the full tier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_jobs_are_delivered_in_acceptance_order_through_retries() {
    // Three attempts; SQS's visibility is whole seconds, so 100 ms is 0 s.
    let l = line(vec![Duration::from_millis(100); 2]).await;

    let n = testkit::size::scaled(100, 1_000);
    // How many attempts fail before notification `i` succeeds: mostly none,
    // 3 (every attempt: dead-lettered) for one in twenty. Fixed, so a
    // failure names the same case every run.
    let failures = |i: usize| match (i * 7_919 + 13) % 100 {
        0..=74 => 0,
        75..=86 => 1,
        87..=94 => 2,
        _ => 3,
    };
    let mut script = Vec::new();
    for i in 0..n {
        script.extend(std::iter::repeat_n((400, None), failures(i)));
        if failures(i) < 3 {
            script.push((200, None));
        }
    }
    l.rx.script(&script);
    let ids: Vec<String> = (0..n).map(|i| format!("evt-ordered-{i}")).collect();
    l.ingest(&ids).await;
    let attempts: usize = (0..n)
        .map(|i| failures(i) + usize::from(failures(i) < 3))
        .sum();

    let limit = Duration::from_secs(testkit::size::scaled(60, 540) as u64);
    let retried_records = l.run(attempts, limit).await;
    let arrivals = l.arrivals();
    let expected: Vec<String> = ids.iter().map(|e| l.uuid(e)).collect();
    let mut seen: Vec<String> = Vec::new();
    for uuid in &arrivals {
        if seen.last() != Some(uuid) {
            seen.push(uuid.clone());
        }
    }
    let first_wrong = seen.iter().zip(&expected).position(|(a, b)| a != b);
    assert!(
        seen == expected,
        "{} blocks for {n} notifications ({} of {attempts} attempts), first difference at \
         {first_wrong:?}",
        seen.len(),
        arrivals.len()
    );
    for (i, uuid) in expected.iter().enumerate() {
        let count = arrivals.iter().filter(|a| *a == uuid).count();
        assert_eq!(
            count,
            failures(i) + usize::from(failures(i) < 3),
            "notification {i}"
        );
    }
    // Each retry was a record reported failed (kept in its line), not a new message.
    let retries: usize = (0..n).map(|i| failures(i).min(2)).sum();
    assert_eq!(retried_records, retries);
    // The ones that failed every attempt are on the FIFO dead-letter queue.
    let mut dead = Vec::new();
    loop {
        let out =
            l.w.sqs
                .receive_message()
                .queue_url(&l.fifo_dlq)
                .max_number_of_messages(10)
                .visibility_timeout(300)
                .wait_time_seconds(0)
                .send()
                .await
                .unwrap();
        if out.messages().is_empty() {
            break;
        }
        for m in out.messages() {
            let job: DeliveryJob = serde_json::from_str(m.body().unwrap()).unwrap();
            dead.push(job.id.to_string());
            // Deleted, so its group's next is returned.
            l.w.sqs
                .delete_message()
                .queue_url(&l.fifo_dlq)
                .receipt_handle(m.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
        }
    }
    dead.sort();
    let mut expected_dead: Vec<String> = (0..n)
        .filter(|&i| failures(i) == 3)
        .map(|i| expected[i].clone())
        .collect();
    expected_dead.sort();
    assert_eq!(dead, expected_dead);
}

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
