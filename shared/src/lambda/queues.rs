//! The SQS-triggered functions: `ingest-events` (EventsQueue) and
//! `deliver-notifications` (DeliveryQueue). Both answer with
//! `batchItemFailures`, so only failed records come back.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use tracing::Instrument;

use crate::app::App;
use crate::aws::sqs::{SqsEventBatch, SqsQueue};
use crate::delivery;
use crate::ingest::{self, EventEnvelope};
use crate::queue::Outbox;

pub use crate::services::aws::{queue_functions, QueueFunctions};

/// `ingest-events`: one event envelope per record. A record that fails
/// (invalid, or a DynamoDB/SQS error) is reported and retried by SQS until
/// the queue's redrive policy moves it to its DLQ. An invalid event is
/// logged with the fields at fault (`fields`, e.g. `message.direction`),
/// never with its content.
pub async fn ingest_events(app: &App, outbox: &dyn Outbox, event: SqsEvent) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    for record in &event.records {
        let id = record.message_id.clone().unwrap_or_default();
        if let Err(Rejected { fields, reason }) = ingest_record(app, outbox, record).await {
            tracing::error!(sqs_message_id = %id, fields = %fields, %reason, "event not ingested");
            response.add_failure(id);
        }
    }
    response
}

/// Why a record was not ingested: the fields at fault (comma-separated,
/// empty when it is not the event's fault) and the reason.
struct Rejected {
    fields: String,
    reason: String,
}

impl From<String> for Rejected {
    fn from(reason: String) -> Self {
        Rejected {
            fields: String::new(),
            reason,
        }
    }
}

async fn ingest_record(
    app: &App,
    outbox: &dyn Outbox,
    record: &SqsMessage,
) -> Result<(), Rejected> {
    let body = record
        .body
        .as_deref()
        .ok_or_else(|| Rejected::from("the record has no body".to_owned()))?;
    let de = &mut serde_json::Deserializer::from_str(body);
    let envelope: EventEnvelope = serde_path_to_error::deserialize(de).map_err(|e| Rejected {
        fields: e.path().to_string(),
        reason: format!("not an event envelope: {}", e.into_inner()),
    })?;
    let event = envelope.validate(app.now_ms()).map_err(|e| Rejected {
        fields: e
            .errors
            .iter()
            .map(|f| f.field.as_str())
            .collect::<Vec<_>>()
            .join(","),
        reason: e.detail,
    })?;
    let span = tracing::info_span!("event", org_id = %event.organization_id, event_id = %event.id);
    ingest::ingest(app, outbox, event)
        .instrument(span)
        .await
        .map(|_| ())
        .map_err(|e| Rejected::from(e.detail))
}

/// `deliver-notifications`: one delivery job per record, each through
/// [`delivery::deliver`], concurrently, on the event-source batch: a record
/// is done when delivered, dropped or dead-lettered; anything else (a retry,
/// whose visibility is now the retry delay, or an unreadable record) is
/// reported, so SQS redelivers it.
pub async fn deliver_notifications(
    app: &App,
    queue: &SqsQueue,
    event: SqsEvent,
) -> SqsBatchResponse {
    let batch = SqsEventBatch::new(queue.clone());
    let deliveries = event
        .records
        .iter()
        .map(|record| deliver_record(app, &batch, record));
    futures_util::future::join_all(deliveries).await;
    let mut response = SqsBatchResponse::default();
    for record in &event.records {
        if !batch.is_done(record.receipt_handle.as_deref().unwrap_or("")) {
            response.add_failure(record.message_id.clone().unwrap_or_default());
        }
    }
    response
}

async fn deliver_record(app: &App, batch: &SqsEventBatch, record: &SqsMessage) {
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
            return;
        }
    };
    let span =
        tracing::info_span!("delivery", org_id = %lease.job.org_id, notification = %lease.job.id);
    if let Err(e) = delivery::deliver(app, batch, &lease).instrument(span).await {
        tracing::error!(error = %e, notification = %lease.job.id, "cannot settle a delivery; SQS redelivers it");
    }
}
