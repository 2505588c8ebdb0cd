//! A job held while its subscription's breaker is open, and put back when
//! it closes. While open, one job is kept in the queue to probe when the
//! cool-down ends (the waker, claimed compare-and-set) and the others are
//! parked, where the queue parks ([`DeliveryQueue::park`](crate::queue::DeliveryQueue::park)); the close puts
//! the parked jobs back ([`unpark`]), whichever step sees it first: the
//! gate, the health an attempt leaves, or a job parked just after it.

use super::{Reason, Run, Verdict};
use crate::health::{BreakerState, Health};
use crate::ids::{OrgId, SubscriptionId};

/// A job its subscription's open breaker holds until `at`: kept in the
/// queue as the waker if none is, else parked (deferred where the queue
/// does not park). Half-open with a probe in flight, it is deferred past
/// the probe.
pub async fn hold(
    run: &Run<'_>,
    org: &OrgId,
    id: &SubscriptionId,
    mut health: Health,
    at: i64,
) -> Verdict {
    let (app, now) = (run.app, run.now);
    if !run.queue.parks() {
        let reason = Reason::BreakerOpen;
        return Verdict::Defer { at, reason };
    }
    for _ in 0..3 {
        if !matches!(health.state(now), BreakerState::Open { .. }) {
            break;
        }
        let Some(waker) = health.claim_waker(now, at) else {
            let reason = Reason::BreakerOpen;
            return Verdict::Park { at, reason };
        };
        match app.store.update_health(org, id, health.rev, &waker).await {
            Ok(true) => {
                app.breakers.remember(id, &waker, now);
                let reason = Reason::KeptToProbe;
                return Verdict::Defer { at, reason };
            }
            Ok(false) => match app.store.get_subscription(org, id).await {
                Ok(Some(fresh)) => health = fresh.health,
                _ => break,
            },
            Err(_) => break,
        }
    }
    let reason = Reason::BreakerOpen;
    Verdict::Defer { at, reason }
}

/// Puts a closed breaker's parked jobs back in the queue, then clears its
/// `parked` mark; a failure leaves the mark, so the next delivery of the
/// subscription tries again. One unpark at a time per subscription in this
/// process: a delivery that asks meanwhile makes it go again.
pub async fn unpark(run: &Run<'_>, org: &OrgId, id: &SubscriptionId, health: Health, now: i64) {
    let (app, queue) = (run.app, run.queue);
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
