//! What the queue functions tell their operators: one CloudWatch EMF line per invocation, and
//! the event's trace carried to the callback (issue 23).

use super::*;

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
