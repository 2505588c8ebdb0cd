//! The jobs of an event's notifications, and their commit: shared by
//! events ([`super::fan_out`], [`super::ingest_all`]) and operational
//! notices ([`crate::notice`]), which are ingested the same way.

use crate::app::App;
use crate::ids::OrgId;
use crate::model::Message;
use crate::notification::{notification_id, notification_id_at, Notification};
use crate::queue::{DeliveryJob, EventCommit, Outbox, StoreOrQueueError};
use crate::store::StoredSubscription;

/// The job that delivers the notification `render(uuid)` to `to`, created
/// at `at`, its uuid derived from the event and the subscription (the same
/// on a repeat) and, when the event carries its time (`timed`), from `at`.
pub(crate) fn job_for(
    event_id: &str,
    to: &StoredSubscription,
    at: i64,
    timed: bool,
    render: impl FnOnce(&str) -> Notification,
) -> DeliveryJob {
    let uuid = match timed {
        true => notification_id_at(event_id, to.id.as_str(), at),
        false => notification_id(event_id, to.id.as_str()),
    }
    .to_string();
    let body = serde_json::to_string(&render(&uuid)).expect("notification serialises");
    DeliveryJob {
        traceparent: crate::telemetry::trace::current().map(|t| t.header()),
        // The subscription as fan-out read it (DynamoDB: its filter-index copy).
        ordered: to.ordered,
        ..DeliveryJob::new(uuid.into(), to.org_id.clone(), to.id.clone(), body, at)
    }
}

/// Commits an event's jobs through the outbox and wakes the workers when
/// something new was queued; false for an event id seen before.
pub(crate) async fn commit(
    app: &App,
    outbox: &dyn Outbox,
    org: &OrgId,
    event_id: &str,
    message: Option<&Message>,
    jobs: Vec<DeliveryJob>,
) -> Result<bool, StoreOrQueueError> {
    let queued = !jobs.is_empty();
    let new = outbox.commit(org, event_id, message, jobs).await?;
    if new && queued {
        app.delivery_wake.notify_one();
    }
    Ok(new)
}

/// [`commit`] of several events ([`Outbox::commit_all`]); one outcome per event.
pub(crate) async fn commit_all(
    app: &App,
    outbox: &dyn Outbox,
    events: Vec<EventCommit>,
) -> Vec<Result<bool, StoreOrQueueError>> {
    let queued: Vec<bool> = events.iter().map(|e| !e.jobs.is_empty()).collect();
    let outcomes = outbox.commit_all(events).await;
    if queued
        .iter()
        .zip(&outcomes)
        .any(|(queued, outcome)| *queued && matches!(outcome, Ok(true)))
    {
        app.delivery_wake.notify_one();
    }
    outcomes
}
