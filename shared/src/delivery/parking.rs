//! Step 7 of [`deliver`](super): a job held while its subscription's
//! breaker is open. One job is kept in the queue to probe when the
//! cool-down ends (the waker, claimed compare-and-set) and the others are
//! parked, where the queue parks
//! ([`DeliveryQueue::park`](crate::queue::DeliveryQueue::park)); the close
//! puts the parked jobs back ([`settle`](super::settle), whichever delivery
//! sees it first: the gate, the health an attempt leaves, or a job parked
//! just after it).

use super::found::{Found, Verdict};
use super::reason::Reason;
use super::run::Run;
use crate::health::{BreakerState, Health};

/// Step 7: the verdict, or, for a job its breaker holds, whether it is
/// kept as the waker or parked ([`hold`]).
pub async fn park(run: &Run<'_>, found: &Found, verdict: Verdict) -> Verdict {
    match found {
        Found::BreakerOpen { health, at } => hold(run, Health::clone(health), *at).await,
        _ => verdict,
    }
}

/// A job its subscription's open breaker holds until `at`: kept in the
/// queue as the waker if none is, else parked (deferred where the queue
/// does not park). Half-open with a probe in flight, it is deferred past
/// the probe.
async fn hold(run: &Run<'_>, mut health: Health, at: i64) -> Verdict {
    let (app, now) = (run.app, run.now);
    let (org, id) = (&run.job().org_id, &run.job().subscription_id);
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
