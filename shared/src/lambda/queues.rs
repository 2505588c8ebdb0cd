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
use crate::telemetry::emf;
use crate::telemetry::trace::{self, TraceParent};

pub use crate::services::aws::{queue_functions, QueueFunctions};

/// `ingest-events`: one event envelope per record. A record that fails
/// (invalid, or a DynamoDB/SQS error) is reported and retried by SQS until
/// the queue's redrive policy moves it to its DLQ. An invalid event is
/// logged with the fields at fault (`fields`, e.g. `message.direction`),
/// never with its content.
///
/// Each record is validated and fanned out, one after another; then the
/// batch's events are committed together ([`ingest::ingest_all`]), so their
/// notifications go to the delivery queue in as few `SendMessageBatch`
/// calls as SQS allows, and only the records whose event could not be
/// committed whole are reported.
///
/// Once DynamoDB or SQS is unavailable (timed out, throttled, down), the
/// rest of the batch is reported failed without being tried: the batch ends
/// after one bounded call instead of one per record, well inside the
/// function timeout, and SQS redelivers the records after their visibility
/// timeout.
pub async fn ingest_events(app: &App, outbox: &dyn Outbox, event: SqsEvent) -> SqsBatchResponse {
    let mut failed = vec![false; event.records.len()];
    let mut unavailable = false;
    let mut figures = emf::IngestFigures::default();
    // (record, its trace, the event fanned out)
    let mut ready = Vec::new();
    for (at, record) in event.records.iter().enumerate() {
        if unavailable {
            failed[at] = true;
            continue;
        }
        match fan_out_record(app, record).await {
            Ok((trace, fanned)) => ready.push((at, trace, fanned)),
            Err(rejected) => {
                log_rejected(record, &rejected);
                unavailable = rejected.unavailable;
                failed[at] = true;
            }
        }
    }
    if unavailable {
        // Nothing of theirs is written yet: SQS redelivers them too.
        ready.iter().for_each(|(at, _, _)| failed[*at] = true);
    } else {
        let (records, fanned): (Vec<(usize, trace::Span)>, Vec<_>) = ready
            .into_iter()
            .map(|(at, trace, fanned)| ((at, trace), fanned))
            .unzip();
        let outcomes = ingest::ingest_all(app, outbox, fanned).await;
        for ((at, _trace), outcome) in records.into_iter().zip(outcomes) {
            match outcome {
                Ok(ingested) if ingested.duplicate => figures.duplicates += 1,
                Ok(ingested) => {
                    figures.ingested += 1;
                    figures.notifications += ingested.notifications as u64;
                }
                Err(e) => {
                    let rejected = Rejected {
                        unavailable: e.status == http::StatusCode::SERVICE_UNAVAILABLE,
                        ..Rejected::from(e.detail)
                    };
                    log_rejected(&event.records[at], &rejected);
                    unavailable |= rejected.unavailable;
                    failed[at] = true;
                }
            }
        }
    }
    let mut response = SqsBatchResponse::default();
    for (record, _) in event.records.iter().zip(&failed).filter(|(_, f)| **f) {
        response.add_failure(record.message_id.clone().unwrap_or_default());
    }
    figures.records = event.records.len() as u64;
    figures.failed = response.batch_item_failures.len() as u64;
    emf::emit(emf::ingest_line(&figures, app.now_ms()));
    if unavailable {
        tracing::warn!(
            failed = response.batch_item_failures.len(),
            "a dependency is unavailable: the rest of the batch is left to SQS's redelivery"
        );
    }
    response
}

fn log_rejected(record: &SqsMessage, rejected: &Rejected) {
    let id = record.message_id.as_deref().unwrap_or_default();
    let Rejected { fields, reason, .. } = rejected;
    tracing::error!(sqs_message_id = %id, fields = %fields, %reason, "event not ingested");
}

/// Why a record was not ingested: the fields at fault (comma-separated,
/// empty when it is not the event's fault) and the reason.
struct Rejected {
    fields: String,
    reason: String,
    /// The store or the queue is unavailable (a `503`), not this record's fault.
    unavailable: bool,
}

impl From<String> for Rejected {
    fn from(reason: String) -> Self {
        Rejected {
            fields: String::new(),
            reason,
            unavailable: false,
        }
    }
}

/// A record's event, validated and fanned out in its producer's trace (a
/// `traceparent` message attribute, else X-Ray's header), which stays open
/// until the event is committed.
async fn fan_out_record(
    app: &App,
    record: &SqsMessage,
) -> Result<(trace::Span, ingest::FannedOut), Rejected> {
    let body = record
        .body
        .as_deref()
        .ok_or_else(|| Rejected::from("the record has no body".to_owned()))?;
    let de = &mut serde_json::Deserializer::from_str(body);
    let envelope: EventEnvelope = serde_path_to_error::deserialize(de).map_err(|e| Rejected {
        fields: e.path().to_string(),
        reason: format!("not an event envelope: {}", e.into_inner()),
        unavailable: false,
    })?;
    // An event without `occurredAt` occurred when SQS accepted it: the
    // same on a redelivery, so its notifications' bytes are too.
    let accepted_at = accepted_at(record, envelope.occurred_at, app.now_ms());
    let mut event = envelope
        .validate(accepted_at.unwrap_or_else(|| app.now_ms()))
        .map_err(|e| Rejected {
            fields: e
                .errors
                .iter()
                .map(|f| f.field.as_str())
                .collect::<Vec<_>>()
                .join(","),
            reason: e.detail,
            unavailable: false,
        })?;
    event.accepted_at = accepted_at;
    event.redelivered = record
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|n| n.parse::<u32>().ok())
        .is_some_and(|n| n > 1);
    let span = tracing::info_span!("event", org_id = %event.organization_id, event_id = %event.id);
    let trace = trace::start("ingest", trace::Kind::Consumer, trace_of(record));
    let fanned = trace::scope(trace.context(), ingest::fan_out(app, event))
        .instrument(span)
        .await
        .map_err(|e| Rejected {
            unavailable: e.status == http::StatusCode::SERVICE_UNAVAILABLE,
            ..Rejected::from(e.detail)
        })?;
    Ok((trace, fanned))
}

/// SQS keeps a message at most 14 days: a `SentTimestamp` older than
/// that (with a day's margin), or ahead of the clock by more than a few
/// minutes, is not a real record's (a hand-made event: the sample files).
const SENT_AT_MAX_AGE_MS: i64 = 15 * 86_400_000;
const SENT_AT_MAX_AHEAD_MS: i64 = 5 * 60_000;

/// How long before SQS accepted it an event's `occurredAt` may be and
/// still date its notifications.
const OCCURRED_WITHIN_MS: i64 = 3_600_000;

/// The time the record's event carries, which dates its notifications and
/// their ids (docs/decisions/event-ingestion.md): its `occurredAt` when that
/// is within the hour before SQS accepted it (so a producer that sends the
/// same event twice gets the same ids), else when SQS accepted it
/// (`SentTimestamp`, the same on every redelivery). `None` when the record
/// has no plausible `SentTimestamp`: the event is then recorded.
fn accepted_at(record: &SqsMessage, occurred_at: Option<i64>, now: i64) -> Option<i64> {
    let sent: i64 = record.attributes.get("SentTimestamp")?.parse().ok()?;
    if !(now - SENT_AT_MAX_AGE_MS..=now + SENT_AT_MAX_AHEAD_MS).contains(&sent) {
        return None;
    }
    Some(match occurred_at {
        Some(at) if (sent - OCCURRED_WITHIN_MS..=sent + SENT_AT_MAX_AHEAD_MS).contains(&at) => at,
        _ => sent,
    })
}

/// The trace context an events-queue record carries, if any.
fn trace_of(record: &SqsMessage) -> Option<TraceParent> {
    let attribute = record.message_attributes.get("traceparent");
    let w3c = attribute.and_then(|a| a.string_value.as_deref());
    w3c.and_then(TraceParent::parse).or_else(|| {
        let xray = record.attributes.get("AWSTraceHeader")?;
        TraceParent::from_xray(xray)
    })
}

/// `deliver-notifications`: one delivery job per record, each through
/// [`delivery::deliver`], concurrently, on the event-source batch: a record
/// is done when delivered, dropped or dead-lettered; anything else (a retry,
/// whose visibility is now the retry delay, or an unreadable record) is
/// reported, so SQS redelivers it.
///
/// Records of the FIFO queue of ordered subscriptions (an `eventSourceARN`
/// ending in `.fifo`; its mapping's batches hold one) are kept in their
/// line: a retry or a deferral sets the message's visibility to its wait
/// and reports the record failed, so Lambda leaves it where it is.
pub async fn deliver_notifications(
    app: &App,
    queue: &SqsQueue,
    outbox: &dyn Outbox,
    event: SqsEvent,
) -> SqsBatchResponse {
    let batch = SqsEventBatch::new(queue.clone());
    let deliveries = event
        .records
        .iter()
        .map(|record| deliver_record(app, &batch, outbox, record));
    let attempts = futures_util::future::join_all(deliveries).await;
    let mut response = SqsBatchResponse::default();
    for record in &event.records {
        let handle = record.receipt_handle.as_deref().unwrap_or("");
        if !batch.is_done(&SqsQueue::receipt(from_fifo(record), handle)) {
            response.add_failure(record.message_id.clone().unwrap_or_default());
        }
    }
    let mut figures = emf::DeliveryFigures::new(event.records.len() as u64);
    figures.unsettled = response.batch_item_failures.len() as u64;
    for (verdict, took_ms, lag_ms) in attempts.into_iter().flatten() {
        if let delivery::Verdict::Defer {
            reason: delivery::Reason::ServiceFault(_),
            ..
        } = &verdict
        {
            figures.service_faults += 1;
        }
        figures.attempt(verdict.label(), took_ms, lag_ms);
    }
    emf::emit(emf::delivery_line(&figures, app.now_ms()));
    response
}

/// Whether the record comes from a FIFO queue (the ordered subscriptions').
fn from_fifo(record: &SqsMessage) -> bool {
    record
        .event_source_arn
        .as_deref()
        .is_some_and(|arn| arn.ends_with(".fifo"))
}

/// One record delivered: the verdict, how long it took (ms) and, for a
/// delivery, the lag since the notification's creation (ms).
async fn deliver_record(
    app: &App,
    batch: &SqsEventBatch,
    outbox: &dyn Outbox,
    record: &SqsMessage,
) -> Option<(delivery::Verdict, f64, Option<f64>)> {
    let lease_of = match from_fifo(record) {
        true => SqsQueue::ordered_lease,
        false => SqsQueue::lease,
    };
    let lease = match lease_of(
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
            return None;
        }
    };
    let span =
        tracing::info_span!("delivery", org_id = %lease.job.org_id, notification = %lease.job.id);
    let started = std::time::Instant::now();
    match delivery::deliver(app, batch, outbox, &lease)
        .instrument(span)
        .await
    {
        Ok(verdict) => {
            let took_ms = started.elapsed().as_secs_f64() * 1000.0;
            let created = lease.job.created_at;
            let lag_ms = (matches!(verdict, delivery::Verdict::Delivered) && created > 0)
                .then(|| (app.now_ms() - created).max(0) as f64);
            Some((verdict, took_ms, lag_ms))
        }
        Err(e) => {
            tracing::error!(part = e.part(), error = %e, notification = %lease.job.id, "cannot settle a delivery; SQS redelivers it");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(at: &str) -> SqsMessage {
        let mut record = SqsMessage::default();
        record
            .attributes
            .insert("SentTimestamp".into(), at.to_owned());
        record
    }

    #[test]
    fn an_event_is_dated_by_what_it_carries() {
        let now = 1_800_000_000_000;
        let at = now - 2_000;
        let record = sent(&at.to_string());
        assert_eq!(accepted_at(&record, None, now), Some(at));
        assert_eq!(accepted_at(&record, Some(at - 500), now), Some(at - 500));
        // An occurrence too old (or ahead) to be the notification's time.
        assert_eq!(accepted_at(&record, Some(at - 3_600_001), now), Some(at));
        assert_eq!(accepted_at(&record, Some(at + 600_000), now), Some(at));
        // No plausible SentTimestamp: a hand-made record, recorded instead.
        assert_eq!(accepted_at(&SqsMessage::default(), None, now), None);
        assert_eq!(accepted_at(&sent("1700000000000"), None, now), None);
        assert_eq!(accepted_at(&sent("soon"), None, now), None);
        let ahead = (now + 3_600_000).to_string();
        assert_eq!(accepted_at(&sent(&ahead), None, now), None);
    }
}
