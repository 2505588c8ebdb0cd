//! The delivery queue conformance suite on SQS (moto's server, started by
//! scripts/test.sh), each case on a queue of its own with its own DLQ.

use testkit::queue_conformance;

use std::sync::Arc;

use aws_sdk_sqs::Client;
use webhook_core::aws::sqs::SqsQueue;
use webhook_core::queue::DeliveryQueue;

async fn client() -> Client {
    testkit::emulators::require(testkit::emulators::SQS);
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    Client::new(&config)
}

async fn new_queue(client: &Client) -> (String, String) {
    let name = format!("q-{}", uuid::Uuid::new_v4().simple());
    let dlq = client
        .create_queue()
        .queue_name(format!("{name}-dlq"))
        .send()
        .await
        .unwrap();
    let q = client
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .unwrap();
    (
        q.queue_url().unwrap().to_owned(),
        dlq.queue_url().unwrap().to_owned(),
    )
}

async fn queue() -> queue_conformance::Harness {
    let client = client().await;
    let (url, dlq) = new_queue(&client).await;
    let queue = Arc::new(SqsQueue::new(client.clone(), url, Some(dlq.clone())));
    queue_conformance::Harness {
        queue,
        // The dead-letter queue, received from as an operator would.
        dead_letters: Box::new(move || {
            let (client, dlq) = (client.clone(), dlq.clone());
            Box::pin(async move {
                let got = client
                    .receive_message()
                    .queue_url(&dlq)
                    .max_number_of_messages(10)
                    .message_attribute_names("All")
                    .wait_time_seconds(1)
                    .send()
                    .await
                    .unwrap();
                got.messages()
                    .iter()
                    .map(|m| {
                        let job: webhook_core::queue::DeliveryJob =
                            serde_json::from_str(m.body().unwrap()).unwrap();
                        let reason = m.message_attributes().unwrap()["reason"]
                            .string_value()
                            .unwrap()
                            .to_owned();
                        queue_conformance::DeadLetter {
                            id: job.id.to_string(),
                            subscription_id: job.subscription_id.to_string(),
                            body: job.body,
                            reason,
                        }
                    })
                    .collect()
            })
        }),
    }
}

testkit::queue_conformance_tests!(queue());

/// A retry is not held in flight for its wait: the received message is
/// deleted and the job sent again with a delay, in its subscription's
/// message group (what SQS fair queues order by).
#[tokio::test]
async fn retries_leave_the_in_flight_window_in_their_subscriptions_group() {
    use aws_sdk_sqs::types::{MessageSystemAttributeName as Attr, QueueAttributeName as Q};
    let client = client().await;
    let (url, dlq) = new_queue(&client).await;
    let queue = SqsQueue::new(client.clone(), url.clone(), Some(dlq));
    queue
        .enqueue(vec![queue_conformance::job(6)])
        .await
        .unwrap();
    let leases = queue
        .receive(10, 100, std::time::Duration::from_secs(30))
        .await
        .unwrap();
    queue
        .retry_after(&leases[0], std::time::Duration::from_secs(60))
        .await
        .unwrap();
    let counts = client
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(Q::All)
        .send()
        .await
        .unwrap();
    let count = |name: Q| -> u32 { counts.attributes().unwrap()[&name].parse().unwrap() };
    assert_eq!(
        count(Q::ApproximateNumberOfMessagesNotVisible),
        0,
        "nothing in flight"
    );
    assert_eq!(
        count(Q::ApproximateNumberOfMessagesDelayed),
        1,
        "the retry, delayed"
    );
    // The first message carries the group too.
    queue
        .enqueue(vec![queue_conformance::job(7)])
        .await
        .unwrap();
    let out = client
        .receive_message()
        .queue_url(&url)
        .message_system_attribute_names(Attr::MessageGroupId)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    let group = out.messages()[0].attributes().unwrap()[&Attr::MessageGroupId].clone();
    assert_eq!(group, queue_conformance::job(7).subscription_id.to_string());
}

#[tokio::test]
async fn dead_letters_land_on_the_dlq_with_their_reason() {
    let client = client().await;
    let (url, dlq) = new_queue(&client).await;
    let queue = SqsQueue::new(client.clone(), url, Some(dlq.clone()));
    queue
        .enqueue(vec![queue_conformance::job(5)])
        .await
        .unwrap();
    let leases = queue
        .receive(10, 100, std::time::Duration::from_secs(30))
        .await
        .unwrap();
    queue
        .dead_letter(&leases[0], "gave up after 11 attempts")
        .await
        .unwrap();
    let out = client
        .receive_message()
        .queue_url(&dlq)
        .message_attribute_names("All")
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    let m = &out.messages()[0];
    let job: webhook_core::queue::DeliveryJob = serde_json::from_str(m.body().unwrap()).unwrap();
    assert_eq!(job, queue_conformance::job(5));
    let reason = m.message_attributes().unwrap()["reason"]
        .string_value()
        .unwrap();
    assert_eq!(reason, "gave up after 11 attempts");
}
