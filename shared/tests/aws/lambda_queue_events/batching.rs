//! An ingest batch's jobs share `SendMessageBatch` calls, and an entry SQS refuses fails only
//! its own event (issue 24).

use super::*;

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
