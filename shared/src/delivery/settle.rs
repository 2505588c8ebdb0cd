//! Step 8 of [`deliver`](super), once the verdict is in: the attempt and
//! the notification's new state in the delivery history ([`remember`]),
//! then the lease settled with the verdict ([`apply`]), and the one count of
//! every verdict settled ([`count`]). A job held before its attempt is
//! settled at once, nothing recorded; a closed breaker's parked jobs are
//! put back ([`unpark`]).
//!
//! The history is written before the lease is settled: if it cannot be, the
//! lease is left to run out and the notification is attempted again, so a
//! crash or a store failure can duplicate an attempt but never lose an
//! outcome.

use std::time::Duration;

use super::found::{Attempt, Attempted, Closed, Found, Verdict};
use super::run::Run;
use crate::health::BreakerState;
use crate::history::{AttemptRecord, NotificationStatus, Outcome};
use crate::queue::{QueueError, StoreOrQueueError};

/// Code of a notification that was not sent because its subscription was
/// deleted, is not ACTIVE or expired.
pub const NOT_ACTIVE: &str = "SUBSCRIPTION_NOT_ACTIVE";
/// Code of a notification that can never be sent (unusable secret or uri).
pub const UNSENDABLE: &str = "UNSENDABLE";

/// Step 8: settles what the steps found with its verdict: a breaker seen
/// closed with jobs parked (`closed`) has them put back; an attempt is
/// remembered; the lease is settled; a job just parked whose breaker closed
/// meanwhile is put back; and the verdict counted (not a superseded one).
pub async fn settle(
    run: &Run<'_>,
    found: &Found,
    (verdict, outcome): (&Verdict, &'static str),
    closed: Option<Closed>,
) -> Result<(), StoreOrQueueError> {
    if let Some(closed) = closed {
        unpark(run, closed).await;
    }
    let mut call_ms = None;
    match found {
        Found::Attempted(attempted) => {
            remember(run, attempted, verdict).await?;
            call_ms = attempted.call_ms();
        }
        Found::ServiceFault(fault) => {
            let job = run.job();
            tracing::error!(part = "destinations", kind = fault.kind(), error = %fault,
                notification = %job.id, subscription_id = %job.subscription_id, org_id = %job.org_id,
                "the service's own fault reaching an AWS destination; deferred");
            crate::telemetry::metrics::service_fault(fault.kind());
        }
        Found::Held(_) | Found::BreakerOpen { .. } | Found::Superseded => {}
    }
    apply(run, verdict).await?;
    if matches!(verdict, Verdict::Park { .. }) {
        closed_meanwhile(run).await;
    }
    if !matches!(found, Found::Superseded) {
        let lag = lag(verdict, call_ms, run.job().created_at, run.now);
        count(outcome, call_ms, lag);
    }
    Ok(())
}

/// The attempt and the notification's new state, in the history.
async fn remember(
    run: &Run<'_>,
    attempted: &Attempted,
    verdict: &Verdict,
) -> Result<(), StoreOrQueueError> {
    let made = attempted.made.clone();
    let Some(outcome) = outcome(&attempted.attempt, made, verdict) else {
        return Ok(());
    };
    run.app
        .history
        .record_outcome(run.job(), &outcome)
        .await
        .map_err(|e| {
            crate::telemetry::metrics::store_error(e.kind());
            StoreOrQueueError::Store(e)
        })
}

/// The history's record of a delivery: None when nothing is known (the
/// store could not be read, so nothing was attempted).
fn outcome(attempt: &Attempt, made: Option<AttemptRecord>, verdict: &Verdict) -> Option<Outcome> {
    if matches!(attempt, Attempt::StoreUnavailable(_)) {
        return None;
    }
    let (status, next_attempt_at) = match verdict {
        Verdict::Delivered => (NotificationStatus::Delivered, None),
        Verdict::Retry { at, .. } => (NotificationStatus::Pending, Some(*at)),
        Verdict::Defer { .. } | Verdict::Park { .. } => return None,
        Verdict::Dead(_) | Verdict::Blacklist(_) | Verdict::Drop(_) => {
            (NotificationStatus::Failed, None)
        }
    };
    let code = match (attempt, &made) {
        (_, Some(_)) => None,
        (Attempt::Unsendable(_), None) => Some(UNSENDABLE.to_owned()),
        (_, None) => Some(NOT_ACTIVE.to_owned()),
    };
    Some(Outcome {
        status,
        next_attempt_at,
        attempt: made,
        code,
    })
}

/// Applies the verdict to the lease.
async fn apply(run: &Run<'_>, verdict: &Verdict) -> Result<(), QueueError> {
    let (queue, lease, now) = (run.queue, run.lease, run.now);
    let job = &lease.job;
    let delay = |at: &i64| Duration::from_millis(u64::try_from(at - now).unwrap_or(0));
    match verdict {
        Verdict::Delivered => {
            tracing::debug!(notification = %job.id, subscription_id = %job.subscription_id, attempt = lease.attempt, "delivered");
            queue.complete(lease).await
        }
        Verdict::Drop(reason) => {
            tracing::info!(notification = %job.id, subscription_id = %job.subscription_id, org_id = %job.org_id, %reason, "notification dropped");
            queue.complete(lease).await
        }
        Verdict::Retry { at, reason } => {
            let delay = delay(at);
            tracing::info!(notification = %job.id, subscription_id = %job.subscription_id, org_id = %job.org_id, attempt = lease.attempt, delay_ms = delay.as_millis() as u64, %reason, "delivery failed, will retry");
            queue.retry_after(lease, delay).await
        }
        Verdict::Defer { at, reason } => {
            let delay = delay(at);
            tracing::debug!(notification = %job.id, subscription_id = %job.subscription_id, delay_ms = delay.as_millis() as u64, %reason, "deferred");
            queue.defer(lease, delay).await
        }
        Verdict::Park { at, reason } => {
            let delay = delay(at);
            tracing::debug!(notification = %job.id, subscription_id = %job.subscription_id, %reason, "parked");
            queue.park(lease, delay).await
        }
        Verdict::Dead(reason) | Verdict::Blacklist(reason) => {
            tracing::warn!(notification = %job.id, subscription_id = %job.subscription_id, org_id = %job.org_id, attempt = lease.attempt, %reason, "notification dead-lettered");
            queue.dead_letter(lease, &reason.to_string()).await
        }
    }
}

/// A parked job whose breaker closed meanwhile (the close may have listed
/// the parked jobs before this one was parked) is put back at once: a job
/// is parked before this read, and a close lists them after its write, so
/// every parked job is either listed by a close or sees it.
async fn closed_meanwhile(run: &Run<'_>) {
    let (app, job) = (run.app, run.job());
    let (org, id) = (&job.org_id, &job.subscription_id);
    if let Ok(Some(sub)) = app.store.get_subscription(org, id).await {
        let at = app.clock.now_ms();
        app.breakers.remember(id, &sub.health, at);
        if sub.health.state(at) == BreakerState::Closed {
            unpark(run, (sub.health, at)).await;
        }
    }
}

/// Puts a closed breaker's parked jobs back in the queue, then clears its
/// `parked` mark (`health`, as seen at `now`); a failure leaves the mark, so the next delivery of the
/// subscription tries again. One unpark at a time per subscription in this
/// process: a delivery that asks meanwhile makes it go again.
async fn unpark(run: &Run<'_>, (health, now): Closed) {
    let (app, queue) = (run.app, run.queue);
    let (org, id) = (&run.job().org_id, &run.job().subscription_id);
    if !queue.parks() {
        return;
    }
    let Some(unparking) = app.breakers.begin_unpark(id) else {
        return;
    };
    let mut result = queue.unpark(id).await;
    while result.is_ok() && unparking.again() {
        let more = queue.unpark(id).await;
        result = result.and_then(|n| more.map(|m| n + m));
    }
    match result {
        Ok(n) => {
            if n > 0 {
                tracing::info!(subscription_id = %id, org_id = %org, jobs = n, "circuit breaker closed: parked notifications queued again");
                app.delivery_wake.notify_waiters();
            }
            if health.parked {
                let cleared = health.unparked();
                if let Ok(true) = app.store.update_health(org, id, health.rev, &cleared).await {
                    app.breakers.remember(id, &cleared, now);
                }
            }
        }
        Err(e) => {
            tracing::warn!(subscription_id = %id, error = %e, "cannot queue parked notifications again; the next delivery retries")
        }
    }
}

/// Counts a decided verdict: its `outcome` (the verdict's label), the
/// callback call's duration (`call_ms`, none when nothing was sent) and, for
/// a delivery, its `lag` from the notification's creation to the answer.
fn count(outcome: &'static str, call_ms: Option<u64>, lag: Option<Duration>) {
    let call = call_ms.map(Duration::from_millis);
    crate::telemetry::metrics::delivery_attempt(outcome, call, lag);
}

/// A delivery's lag: from the notification's creation to the 2xx answer
/// (None for any other verdict, or when nothing was sent).
pub fn lag(
    verdict: &Verdict,
    call_ms: Option<u64>,
    created_at: i64,
    started: i64,
) -> Option<Duration> {
    let answered = started.saturating_add(i64::try_from(call_ms?).ok()?);
    (matches!(verdict, Verdict::Delivered) && created_at > 0)
        .then(|| Duration::from_millis(u64::try_from(answered - created_at).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::found::AfterFailure;
    use crate::delivery::reason::Reason;
    use crate::failure::Failure;
    use crate::history::Trigger;
    use crate::model::SubscriptionStatus;

    fn record(status: u16) -> AttemptRecord {
        AttemptRecord {
            at: 1,
            duration_ms: 12,
            http_status: Some(status),
            code: Some("BAD_STATUS".into()),
            response_body: String::new(),
            trigger: Trigger::Scheduled,
        }
    }

    #[test]
    fn verdicts_become_states() {
        let made = || Some(record(500));
        let failed = Attempt::Failed {
            failure: Failure::Status(500),
            retry_after: None,
            subscription: AfterFailure::Deliverable,
        };
        let retry = outcome(
            &failed,
            made(),
            &Verdict::Retry {
                at: 9,
                reason: Reason::Failed(Failure::Status(500)),
            },
        )
        .unwrap();
        assert_eq!(
            (retry.status, retry.next_attempt_at),
            (NotificationStatus::Pending, Some(9))
        );
        let gave_up = Reason::GaveUp {
            failure: Failure::Status(500),
            attempts: 4,
        };
        let dead = outcome(&failed, made(), &Verdict::Dead(gave_up)).unwrap();
        assert_eq!((dead.status, dead.code), (NotificationStatus::Failed, None));
        let blacklisted = Reason::NotActive(SubscriptionStatus::Blacklisted);
        let unwanted = Attempt::Unwanted(blacklisted.clone());
        let dropped = outcome(&unwanted, None, &Verdict::Drop(blacklisted)).unwrap();
        assert_eq!(dropped.status, NotificationStatus::Failed);
        assert_eq!(dropped.code.as_deref(), Some(NOT_ACTIVE));
        assert!(dropped.attempt.is_none());
        let gone = outcome(&Attempt::Gone, made(), &Verdict::Drop(Reason::Gone)).unwrap();
        assert_eq!(gone.status, NotificationStatus::Failed);
        assert_eq!(
            outcome(
                &Attempt::StoreUnavailable(Reason::StoreUnavailable("x".into())),
                None,
                &Verdict::Retry {
                    at: 1,
                    reason: Reason::StoreUnavailable("x".into())
                }
            ),
            None
        );
        assert_eq!(
            outcome(&Attempt::Succeeded, made(), &Verdict::Delivered)
                .unwrap()
                .status,
            NotificationStatus::Delivered
        );
    }
}
