//! Steps 7 and 8 of [`deliver`](super::deliver), once the verdict is in:
//! [`remember`] the attempt and the notification's new state in the
//! delivery history, then [`settle`] the lease with the verdict; and the
//! one count of every verdict ([`count`]). A job held before its attempt is
//! settled at once ([`settle_held`]).

use std::time::Duration;

use super::{outcome, parking, Attempt, Run, Verdict};
use crate::health::BreakerState;
use crate::history::AttemptRecord;
use crate::queue::{QueueError, StoreOrQueueError};

/// Step 7: the attempt and the notification's new state, in the history.
pub async fn remember(
    run: &Run<'_>,
    attempt: &Attempt,
    made: Option<AttemptRecord>,
    verdict: &Verdict,
) -> Result<(), StoreOrQueueError> {
    let Some(outcome) = outcome::of(attempt, made, verdict) else {
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

/// Step 8: applies the verdict to the lease.
pub async fn settle(run: &Run<'_>, verdict: &Verdict) -> Result<(), QueueError> {
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

/// Settles the lease with a verdict reached without an attempt.
pub async fn settled(run: &Run<'_>, verdict: Verdict) -> Result<Verdict, QueueError> {
    settle(run, &verdict).await?;
    Ok(verdict)
}

/// Settles a job held before its attempt, and counts it. A parked job whose
/// breaker closed meanwhile (the close may have listed the parked jobs
/// before this one was parked) is put back at once: a job is parked before
/// this read, and a close lists them after its write, so every parked job
/// is either listed by a close or sees it.
pub async fn settle_held(run: &Run<'_>, verdict: Verdict) -> Result<Verdict, QueueError> {
    settle(run, &verdict).await?;
    count(run, &verdict, None);
    if matches!(verdict, Verdict::Park { .. }) {
        let (app, job) = (run.app, run.job());
        let (org, id) = (&job.org_id, &job.subscription_id);
        if let Ok(Some(sub)) = app.store.get_subscription(org, id).await {
            let at = app.clock.now_ms();
            app.breakers.remember(id, &sub.health, at);
            if sub.health.state(at) == BreakerState::Closed {
                parking::unpark(run, org, id, sub.health, at).await;
            }
        }
    }
    Ok(verdict)
}

/// The service's own fault reaching an AWS destination (its credentials, its
/// external-id prefix): no attempt, nothing recorded on the subscription
/// (no streak, no breaker, never a blacklist); logged at error level and
/// counted for the operators, the job deferred by the retry schedule's
/// first delay and tried again until the fault is fixed.
pub async fn service_fault(
    run: &Run<'_>,
    fault: crate::callback::destination::ServiceFault,
) -> Result<Verdict, QueueError> {
    let job = run.job();
    tracing::error!(part = "destinations", kind = fault.kind(), error = %fault,
        notification = %job.id, subscription_id = %job.subscription_id, org_id = %job.org_id,
        "the service's own fault reaching an AWS destination; deferred");
    crate::telemetry::metrics::service_fault(fault.kind());
    let first = run.app.config.retry_schedule.first().copied();
    let delay = first.unwrap_or(Duration::from_secs(5)).as_millis() as f64;
    // Spread by up to +20 %, as retries are, so a fixed fault is not met by
    // every deferred job at once.
    let at = run.now + (delay * (1.0 + 0.2 * run.random)) as i64;
    let verdict = Verdict::Defer {
        at,
        reason: super::Reason::ServiceFault(fault),
    };
    settle_held(run, verdict).await
}

/// Counts a decided verdict: its `outcome`, the callback call's duration
/// (`call_ms`, none when nothing was sent) and, for a delivery, its lag
/// from the notification's creation to the answer (start + call).
pub fn count(run: &Run<'_>, verdict: &Verdict, call_ms: Option<u64>) {
    let call = call_ms.map(Duration::from_millis);
    let lag = lag(verdict, call_ms, run.job().created_at, run.now);
    crate::telemetry::metrics::delivery_attempt(verdict.label(), call, lag);
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
