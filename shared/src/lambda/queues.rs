//! The SQS-triggered functions: `ingest-events` (EventsQueue) and
//! `deliver-notifications` (DeliveryQueue). Both answer with
//! `batchItemFailures`, so only failed records come back.

use std::sync::Arc;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use tracing::Instrument;

use super::StartError;
use crate::app::{now_ms, App};
use crate::config::{Config, ConfigError, Profile};
use crate::delivery::{self, Outcome};
use crate::ingest::{self, EventEnvelope};
use crate::queue::aws_outbox::AwsOutbox;
use crate::queue::sqs::SqsQueue;
use crate::queue::{DeliveryQueue, Outbox};
use crate::store::dynamodb::{DynamoStore, Tables};

/// Everything the queue functions need, built once per container.
pub struct QueueApp {
    pub app: App,
    pub queue: SqsQueue,
}

impl QueueApp {
    pub async fn from_env() -> Result<Self, StartError> {
        let config = Config::from_env(Profile::Lambda)?;
        let tables = Tables::required(&config)?;
        let sdk = crate::aws::sdk_config().await;
        let queue_url = config.delivery_queue_url.clone().ok_or(ConfigError {
            var: "WEBHOOKS_DELIVERY_QUEUE_URL",
            message: "is required".into(),
        })?;
        let queue = SqsQueue::new(
            aws_sdk_sqs::Client::new(&sdk),
            queue_url,
            config.delivery_dead_letter_url.clone(),
        );
        let store = Arc::new(DynamoStore::from_sdk(&sdk, tables));
        let outbox = Arc::new(AwsOutbox::new(store.clone(), queue.clone()));
        Ok(QueueApp {
            app: App::new(config, store).with_outbox(outbox),
            queue,
        })
    }
}

/// `ingest-events`: one event envelope per record. A record that fails
/// (invalid, or a DynamoDB/SQS error) is reported and retried by SQS until
/// the queue's redrive policy moves it to its DLQ.
pub async fn ingest_events(app: &App, event: SqsEvent) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    let Some(outbox) = app.outbox.as_deref() else {
        response.set_failures(event.records.iter().filter_map(|r| r.message_id.clone()));
        return response;
    };
    for record in &event.records {
        let id = record.message_id.clone().unwrap_or_default();
        if let Err(reason) = ingest_record(app, outbox, record).await {
            tracing::error!(sqs_message_id = %id, %reason, "event not ingested");
            response.add_failure(id);
        }
    }
    response
}

async fn ingest_record(app: &App, outbox: &dyn Outbox, record: &SqsMessage) -> Result<(), String> {
    let body = record.body.as_deref().ok_or("the record has no body")?;
    let envelope: EventEnvelope =
        serde_json::from_str(body).map_err(|e| format!("not an event envelope: {e}"))?;
    let event = envelope.validate(now_ms()).map_err(|e| e.detail)?;
    let span = tracing::info_span!("event", org_id = %event.organization_id, event_id = %event.id);
    ingest::ingest(app, outbox, event)
        .instrument(span)
        .await
        .map(|_| ())
        .map_err(|e| e.detail)
}

/// `deliver-notifications`: one delivery job per record, delivered
/// concurrently. A failed delivery gets its visibility set to the next
/// retry delay and is reported, so SQS redelivers it then; a given-up one
/// goes to the dead-letter queue.
pub async fn deliver_notifications(
    app: &App,
    queue: &SqsQueue,
    event: SqsEvent,
) -> SqsBatchResponse {
    let attempts = event
        .records
        .iter()
        .map(|record| deliver_record(app, queue, record));
    let results = futures_util::future::join_all(attempts).await;
    let mut response = SqsBatchResponse::default();
    for (record, ok) in event.records.iter().zip(results) {
        if !ok {
            response.add_failure(record.message_id.clone().unwrap_or_default());
        }
    }
    response
}

/// Returns whether the record is done with (delivered, dropped or dead-lettered).
async fn deliver_record(app: &App, queue: &SqsQueue, record: &SqsMessage) -> bool {
    let lease = match SqsQueue::lease(
        record.body.as_deref().unwrap_or(""),
        record.receipt_handle.as_deref().unwrap_or(""),
        record
            .attributes
            .get("ApproximateReceiveCount")
            .map(String::as_str),
    ) {
        Ok(lease) => lease,
        Err(e) => {
            tracing::error!(error = %e, "unreadable delivery record; left to the redrive policy");
            return false;
        }
    };
    let span =
        tracing::info_span!("delivery", org_id = %lease.job.org_id, notification = %lease.job.id);
    async {
        match delivery::attempt(app, &lease).await {
            Outcome::Delivered | Outcome::Dropped(_) => true,
            Outcome::Retry { delay, reason } => {
                tracing::info!(attempt = lease.attempt, delay_ms = delay.as_millis() as u64, %reason, "delivery failed, will retry");
                if let Err(e) = queue.retry_after(&lease, delay).await {
                    tracing::error!(error = %e, "cannot schedule the retry; SQS retries after the visibility timeout");
                }
                false
            }
            Outcome::DeadLetter(reason) => {
                tracing::warn!(attempt = lease.attempt, %reason, "notification dead-lettered");
                match queue.dead_letter(&lease, &reason).await {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot dead-letter; left to the redrive policy");
                        false
                    }
                }
            }
        }
    }
    .instrument(span)
    .await
}
