//! Ingestion in two steps, so a batch of events (an SQS batch of the events
//! queue) can share its commit: each event fanned out to its notifications'
//! jobs, then the fanned-out events committed together through the outbox.

use super::jobs::{commit_all, job_for};
use super::{payload_document, render, Event, Ingested};
use crate::api::problem::{store_or_queue_problem, store_problem};
use crate::app::App;
use crate::error::ApiError;
use crate::ids::OrgId;
use crate::queue::{DeliveryJob, EventCommit, Outbox};
use crate::store::rules::is_deliverable;

/// An event and the jobs of its notifications, ready to commit.
#[derive(Debug, Clone)]
pub struct FannedOut {
    event: Event,
    jobs: Vec<DeliveryJob>,
}

/// The event's notifications: one job per deliverable subscription of its
/// organization to its filter, rendered now (in the caller's trace).
pub async fn fan_out(app: &App, event: Event) -> Result<FannedOut, ApiError> {
    let now = app.now_ms();
    // A time the event carries dates its notifications, so a redelivery
    // repeats their ids and history keys without an event record.
    let at = event.accepted_at.unwrap_or(now);
    let filter = event.filter().to_string();
    let subscriptions = app
        .store
        .subscriptions_for_filter(&filter)
        .await
        .map_err(store_problem)?;
    // Built once per event, and only when a subscription has a payload filter.
    let mut document = None;
    let jobs: Vec<DeliveryJob> = subscriptions
        .iter()
        .filter(|s| is_deliverable(s, now))
        .filter(|s| s.org_id == event.organization_id)
        .filter(|s| match &s.payload_filter {
            None => true,
            Some(f) => f.matches(document.get_or_insert_with(|| payload_document(&event, &filter))),
        })
        .map(|s| {
            job_for(&event.id, s, at, event.accepted_at.is_some(), |uuid| {
                render(&event, &filter, s.id.as_str(), uuid, at)
            })
        })
        .collect();
    Ok(FannedOut { event, jobs })
}

/// Commits fanned-out events together ([`Outbox::commit_all`]: on SQS the
/// jobs of the whole batch share `SendMessageBatch` calls); one outcome per
/// event, in order.
pub async fn ingest_all(
    app: &App,
    outbox: &dyn Outbox,
    events: Vec<FannedOut>,
) -> Vec<Result<Ingested, ApiError>> {
    let counts: Vec<usize> = events.iter().map(|e| e.jobs.len()).collect();
    let (events, commits): (Vec<Event>, Vec<EventCommit>) = events
        .into_iter()
        .map(|FannedOut { event, jobs }| {
            let commit = EventCommit {
                org_id: OrgId::from(&event.organization_id),
                event_id: event.id.clone(),
                message: event.message.clone(),
                jobs,
                accepted_at: event.accepted_at,
                redelivered: event.redelivered,
            };
            (event, commit)
        })
        .unzip();
    let outcomes = commit_all(app, outbox, commits).await;
    events
        .into_iter()
        .zip(counts)
        .zip(outcomes)
        .map(|((event, count), outcome)| {
            let new = outcome.map_err(store_or_queue_problem)?;
            tracing::info!(org_id = %event.organization_id, event_id = %event.id, notifications = count, duplicate = !new, "event ingested");
            Ok(Ingested {
                event_id: event.id,
                notifications: if new { count } else { 0 },
                duplicate: !new,
            })
        })
        .collect()
}
