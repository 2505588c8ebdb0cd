//! An event handed over again (an ingestion that failed halfway, SQS redelivering it, a
//! producer sending it twice, a try left by the version before) is one notification, listed
//! once (issues 24 and 39).

use super::*;

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
