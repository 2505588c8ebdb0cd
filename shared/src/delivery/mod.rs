//! Delivering one notification, the same way on every runtime (the
//! SQLite workers and the SQS poller of `webhooks-local`, the
//! `deliver-notifications` Lambda). [`deliver`] takes a leased job through
//! its steps, each in its own file, in this order; each step hands on what
//! it found ([`Found`]) and the first that stops the job says why, so the
//! job is settled once, at the end:
//!
//! 1. [`admit`]: tenant isolation before anything is read. A job kept in its
//!    line (an ordered subscription's, on the SQS FIFO queue) is numbered
//!    from its notification's summary, read once. A job that is not due
//!    yet, whose subscription's breaker this process saw open lately, or
//!    whose subscription has its cap of calls in flight is held (not
//!    attempted, nothing recorded, no attempt counted); one a resend
//!    delivered meanwhile is dropped;
//! 2. [`prepare`]: the subscription (deliverable?), its signing keys and its
//!    callback target under the address policy;
//! 3. [`gate`]: the receiver's pause, then the breaker as stored, lets the
//!    attempt through, or makes it the half-open probe, or holds it; a
//!    rate-limited subscription's attempt takes its slot and waits for it;
//! 4. [`post`]: sign and POST (or send into an AWS destination);
//! 5. [`record`]: the subscription's failure bookkeeping (streak, blacklist),
//!    its breaker's health after the attempt, and the history's record of
//!    the POST;
//! 6. [`decide`]: a pure function from what the steps found to a [`Verdict`];
//! 7. [`parking`]: a job its open breaker holds is kept in the queue to
//!    probe, or parked until the breaker closes;
//! 8. [`settle`]: the attempt and the notification's new state in the
//!    delivery history, then the queue's lease completed, retried later,
//!    deferred, parked or dead-lettered; a closed breaker's parked jobs put
//!    back;
//! 9. [`tell`]: what the subscription's organization is told about it
//!    ([`crate::notice`]): failing, recovered, disabled, a notification
//!    exhausted. Only failures and the first success after them get here
//!    with something to say; a healthy delivery costs nothing.
//!
//! Below the steps, what they share: what they find and the verdict
//! ([`found`]), why a job was not delivered ([`Reason`]), and the job on its
//! way ([`Run`]). The state and rules the steps apply (breaker, streak,
//! cap) are [`crate::health`]'s. Runtimes only lease jobs and call
//! [`deliver`].

// The steps, numbered above in the order `deliver` calls them: a step
// imports only those after it, and what they share
// (shared/tests/it/architecture.rs).
pub mod admit;
pub mod decide;
pub mod gate;
pub mod parking;
pub mod post;
pub mod prepare;
pub mod record;
pub mod settle;
pub mod tell;
// What they share.
pub mod found;
pub mod reason;
pub mod run;

pub use decide::decide;
pub use found::{AfterFailure, Attempt, Verdict};
pub use reason::Reason;

use crate::app::App;
use crate::queue::{DeliveryQueue, Lease, Outbox, StoreOrQueueError};
use crate::telemetry::trace;
use found::{Attempted, Found};
use run::{Line, Run};

/// Takes one leased job through the steps, and settles its lease with the
/// verdict.
pub async fn deliver(
    app: &App,
    queue: &dyn DeliveryQueue,
    outbox: &dyn Outbox,
    lease: &Lease,
) -> Result<Verdict, StoreOrQueueError> {
    // A job kept in its line is numbered from its notification's summary,
    // read once; if it cannot be, the lease is left to run out.
    let line = Line::read(app, queue, lease).await?;
    let run = &Run::new(app, queue, lease, &line);
    // 1. Admit: due, no breaker remembered open, a slot within the cap
    // (held until the delivery returns).
    let (_slot, held) = admit::admit(run).await;
    let mut span = None;
    // Steps 2 to 5, while the job goes on: what it found, and a breaker
    // seen closed with jobs parked.
    let (found, closed) = 'attempt: {
        if let Some(held) = held {
            break 'attempt (held, None);
        }
        let span = span.insert(trace::attempt_span(
            run.job().traceparent.as_deref(),
            run.lease.attempt,
        ));
        // 2. Prepare: the subscription, its keys and target, or why not sent.
        let ready = match prepare::prepare(run).await {
            Ok(ready) => ready,
            Err(unsent) => {
                let unsent = Box::new(Attempted::unsent(unsent));
                break 'attempt (Found::Attempted(unsent), None);
            }
        };
        // 3. Gate: the breaker as stored lets it through, or holds it.
        let gated = gate::gate(run, &ready.subscription).await;
        let health = match gated.passed {
            Ok(health) => health,
            Err(held) => break 'attempt (held, gated.closed),
        };
        // 4. Post. The service's own fault is no attempt: deferred, told to
        // its operators, nothing counted against the subscription.
        let posted = match post::post(run, &ready, span.context()).await {
            Ok(posted) => posted,
            Err(fault) => break 'attempt (Found::ServiceFault(fault), gated.closed),
        };
        // 5. Record what it leaves on the subscription.
        let (attempted, closed) = record::record(run, ready.subscription, health, posted).await;
        (
            Found::Attempted(Box::new(attempted)),
            closed.or(gated.closed),
        )
    };
    // 6. Decide, 7. park what its breaker holds.
    let verdict = decide::verdict(run, &found);
    let verdict = parking::park(run, &found, verdict).await;
    let outcome = verdict.label();
    if let (Some(span), Found::Attempted(_)) = (span.as_mut(), &found) {
        span.set("webhooks.outcome", outcome);
    }
    // 8. Settle: remember it in the history, then settle the lease.
    settle::settle(run, &found, (&verdict, outcome), closed).await?;
    if let Found::Attempted(attempted) = &found {
        // 9. Tell.
        tell::tell(run, outbox, attempted, &verdict).await;
        if !queue.caps_leases() {
            // How long the slot was held (call and bookkeeping): what
            // spaces the turns of the subscription's jobs over its cap.
            let held = app.clock.now_ms().saturating_sub(run.now);
            app.in_flight
                .observe(&run.job().subscription_id, u64::try_from(held).unwrap_or(0));
        }
    }
    Ok(verdict)
}
