//! The deployed ingestion path, for the event phases: a producer sends the
//! events to an events queue on moto (`SendMessageBatch` of
//! `--cost-events-per-send`, or `SendMessage` one by one for 1), and the
//! suite plays Lambda's event source mapping: `ReceiveMessage` of 10, the
//! batch handed to the real `ingest-events` function (the Lambda binary) (under the fake Runtime
//! API of the `lambda` suite), then `DeleteMessageBatch` of its records.
//! The producer's and the mapping's requests go through a proxy of their
//! own (tallied as `sqs-events:<action>`); the function's DynamoDB and SQS
//! calls through the service's proxies, as webhooks-local's.

use std::path::Path;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageSystemAttributeName, SendMessageBatchRequestEntry,
};
use serde_json::{json, Value};

use super::proxy::Proxy;
use webhooks_bench::runtime_api::RunningFunction;

/// What Lambda's SQS event source hands a function at most (template.yaml `BatchSize`).
const BATCH: i32 = 10;

pub struct EventsPipeline {
    /// The producer's and the event source mapping's client (through the events proxy).
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    function: RunningFunction,
    per_send: usize,
}

fn sqs_err(what: &str) -> impl Fn(String) -> String + '_ {
    move |e| format!("{what}: {e}")
}

fn display<E: std::error::Error + 'static, R: std::fmt::Debug>(
    e: aws_sdk_sqs::error::SdkError<E, R>,
) -> String {
    aws_sdk_sqs::error::DisplayErrorContext(e).to_string()
}

/// Where the function finds the service's tables and delivery queue, and
/// its AWS endpoints (the service's proxies).
pub struct Wiring<'a> {
    pub dynamodb: &'a Proxy,
    pub sqs: &'a Proxy,
    pub subscriptions_table: String,
    pub messages_table: String,
    pub delivery_queue_url: String,
}

impl EventsPipeline {
    pub async fn start(
        bin: &Path,
        log: &Path,
        events_proxy: &Proxy,
        wiring: Wiring<'_>,
        per_send: usize,
    ) -> Result<EventsPipeline, String> {
        if !bin.exists() {
            return Err(format!(
                "{} is missing: build it with `cargo build --release -p webhooks-lambda`",
                bin.display()
            ));
        }
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let config = aws_sdk_sqs::config::Builder::from(&sdk)
            .endpoint_url(events_proxy.url())
            .build();
        let sqs = aws_sdk_sqs::Client::from_conf(config);
        let name = format!(
            "cost-events-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..10]
        );
        let queue_url = sqs
            .create_queue()
            .queue_name(&name)
            .send()
            .await
            .map_err(display)
            .map_err(sqs_err("creating the events queue"))?
            .queue_url()
            .ok_or("no events queue URL")?
            .to_owned();
        let vars = vec![
            (
                "WEBHOOKS_SUBSCRIPTIONS_TABLE".into(),
                wiring.subscriptions_table,
            ),
            ("WEBHOOKS_MESSAGES_TABLE".into(), wiring.messages_table),
            (
                "WEBHOOKS_DELIVERY_QUEUE_URL".into(),
                wiring.delivery_queue_url,
            ),
            ("AWS_ENDPOINT_URL_DYNAMODB".into(), wiring.dynamodb.url()),
            ("AWS_ENDPOINT_URL_SQS".into(), wiring.sqs.url()),
            ("RUST_LOG".into(), "warn".into()),
        ];
        let function = crate::lambda::start(bin, "ingest-events", vars, log).await?;
        Ok(EventsPipeline {
            sqs,
            queue_url,
            function,
            per_send: per_send.clamp(1, BATCH as usize),
        })
    }

    /// The producer: `bodies` on the events queue, `per_send` a request.
    async fn produce(&self, bodies: &[String]) -> Result<(), String> {
        for group in bodies.chunks(self.per_send) {
            if let [body] = group {
                self.sqs
                    .send_message()
                    .queue_url(&self.queue_url)
                    .message_body(body)
                    .send()
                    .await
                    .map_err(display)
                    .map_err(sqs_err("SendMessage"))?;
                continue;
            }
            let entries = group
                .iter()
                .enumerate()
                .map(|(i, body)| {
                    SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(body)
                        .build()
                        .map_err(|e| e.to_string())
                })
                .collect::<Result<Vec<_>, _>>()?;
            let out = self
                .sqs
                .send_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(display)
                .map_err(sqs_err("SendMessageBatch"))?;
            if !out.failed().is_empty() {
                return Err(format!("the events queue refused {:?}", out.failed()));
            }
        }
        Ok(())
    }

    /// The event source mapping: batches of up to 10 received, handed to
    /// ingest-events, and deleted, until `count` events are ingested.
    async fn consume(&self, count: usize) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(300);
        let mut ingested = 0;
        while ingested < count {
            if Instant::now() > deadline {
                return Err(format!("{ingested} of {count} events ingested after 300 s"));
            }
            let out = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(BATCH)
                .visibility_timeout(60)
                .wait_time_seconds(1)
                // As Lambda's mapping hands it on: the event's own time.
                .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
                .send()
                .await
                .map_err(display)
                .map_err(sqs_err("ReceiveMessage"))?;
            let messages = out.messages();
            if messages.is_empty() {
                continue;
            }
            let records: Vec<Value> = messages
                .iter()
                .map(|m| {
                    let sent = m
                        .attributes()
                        .and_then(|a| a.get(&MessageSystemAttributeName::SentTimestamp))
                        .cloned()
                        .unwrap_or_default();
                    json!({
                        "messageId": m.message_id(),
                        "receiptHandle": m.receipt_handle(),
                        "body": m.body(),
                        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": sent},
                        "messageAttributes": {},
                        "md5OfBody": m.md5_of_body(),
                        "eventSource": "aws:sqs",
                        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:cost-events",
                        "awsRegion": "us-east-1",
                    })
                })
                .collect();
            let answer = self
                .function
                .invoke(json!({ "Records": records }).to_string())
                .await?;
            let failed = answer["batchItemFailures"].as_array().map_or(0, Vec::len);
            if failed > 0 {
                return Err(format!("ingest-events failed records: {answer}"));
            }
            let entries = messages
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(m.receipt_handle().unwrap_or_default())
                        .build()
                        .map_err(|e| e.to_string())
                })
                .collect::<Result<Vec<_>, _>>()?;
            self.sqs
                .delete_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(display)
                .map_err(sqs_err("DeleteMessageBatch"))?;
            ingested += messages.len();
        }
        Ok(())
    }

    /// The events sent, then ingested by the function.
    pub async fn ingest(&self, bodies: &[String]) -> Result<(), String> {
        self.produce(bodies).await?;
        self.consume(bodies.len()).await
    }
}
