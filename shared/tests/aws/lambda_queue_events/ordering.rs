//! Ordered subscriptions on Lambda: a FIFO line per subscription, held by a retry, delivered
//! in acceptance order through retries and dead letters.

use super::*;

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
            retry_schedule: None,
            custom_headers: None,
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
