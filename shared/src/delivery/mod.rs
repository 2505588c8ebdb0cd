//! Delivering one notification, the same way on every runtime (SQLite
//! workers, the SQS poller of `webhooks-local --backend aws`, the
//! `deliver-notifications` Lambda). [`deliver`] takes a leased job through
//! its steps, in this order, each in its own file:
//!
//! 0. a job kept in its line (an ordered subscription's, on the SQS FIFO
//!    queue: [`DeliveryQueue::attempts_from_history`])
//!    is numbered from its notification's summary, read once: deferred when
//!    back before its retry's time, dropped when already delivered or failed;
//! 1. [`admit`]: tenant isolation before anything is read. A job that is not
//!    due yet, whose subscription's breaker this process saw open lately, or
//!    whose subscription has its cap of calls in flight is held (deferred,
//!    or parked): not attempted, nothing recorded, no attempt counted;
//! 2. [`prepare`]: the subscription (deliverable?), its signing keys and its
//!    callback target under the address policy;
//! 3. [`admit::gate`]: its circuit breaker as stored lets the attempt
//!    through, or makes it the half-open probe, or holds it; a
//!    rate-limited subscription's attempt takes its slot, and waits for it
//!    ([`admit::wait_for_slot`]);
//! 4. [`prepare::post`]: sign and POST;
//! 5. [`record`]: the subscription's failure bookkeeping (streak, blacklist)
//!    and its breaker's health after the attempt (which may unpark);
//! 6. [`decide`]: a pure function from what the attempt found to a [`Verdict`];
//! 7. [`settle::remember`]: the attempt and the notification's new state in
//!    the delivery history ([`outcome`]);
//! 8. [`settle`]: complete, retry later or dead-letter the queue's lease;
//! 9. tell (`tell.rs`): what the subscription's organization is told about it
//!    ([`crate::notice`]): failing, recovered, disabled, a notification
//!    exhausted. Only failures and the first success after them get here
//!    with something to say; a healthy delivery costs nothing.
//!
//! A held job is settled at once ([`settle::settle_held`]); [`parking`]
//! holds it while its breaker is open and puts the held jobs back when the
//! breaker closes. The state and rules the steps apply (breaker, streak,
//! cap) are [`crate::health`]'s; why a job was not delivered is a typed
//! [`Reason`].
//!
//! The history is written before the lease is settled: if it cannot be, the
//! lease is left to run out and the notification is attempted again, so a
//! crash or a store failure can duplicate an attempt but never lose an
//! outcome. Runtimes only lease jobs and call [`deliver`].

pub mod admit;
pub mod decide;
pub mod outcome;
pub mod parking;
pub mod prepare;
pub mod reason;
pub mod record;
pub mod settle;
mod tell;
pub mod worker;

pub use decide::{decide, AfterFailure, Attempt, Verdict};
pub use reason::Reason;
pub use worker::run_workers;

use crate::app::App;
use crate::history::{NotificationStatus, NotificationSummary, Trigger};
use crate::queue::{DeliveryJob, DeliveryQueue, Lease, Outbox, StoreOrQueueError};
use crate::telemetry::trace;

/// Takes one leased job through the pipeline, records it and settles the
/// lease with the verdict.
pub async fn deliver(
    app: &App,
    queue: &dyn DeliveryQueue,
    outbox: &dyn Outbox,
    lease: &Lease,
) -> Result<Verdict, StoreOrQueueError> {
    // 0. A lease kept in its line (SQS FIFO) is numbered from the history.
    let counted;
    let (lease, summary) = match queue.attempts_from_history(lease) {
        false => (lease, None),
        true => {
            let summary = app.history.summary_of(&lease.job).await?;
            counted = in_line(lease, summary.as_ref());
            (&counted, summary)
        }
    };
    let run = Run::new(app, queue, lease);
    if let Some(at) = summary.as_ref().and_then(|s| line_wait(&run, s)) {
        let held = Verdict::Defer {
            at,
            reason: Reason::NotDue,
        };
        return Ok(settle::settle_held(&run, held).await?);
    }
    // 1. Admit: due, no breaker remembered open, a slot within the cap.
    let _slot = match admit::admit(&run).await {
        Ok(slot) => slot,
        Err(held) => return Ok(settle::settle_held(&run, held).await?),
    };
    if superseded(&run, summary.as_ref()).await {
        return Ok(settle::settled(&run, Verdict::Drop(Reason::Superseded)).await?);
    }
    let mut span = trace::attempt_span(lease.job.traceparent.as_deref(), lease.attempt);
    // 2. Prepare: the subscription, its keys and target, or why not sent.
    let mut attempted = match prepare::prepare(&run).await {
        Err(unsent) => record::Attempted::unsent(unsent),
        Ok(ready) => {
            // 3. Gate: the breaker as stored lets it through, or holds it.
            let cleared = match admit::gate(&run, &ready.subscription).await {
                Ok(cleared) => cleared,
                Err(held) => return Ok(settle::settle_held(&run, held).await?),
            };
            // 3b. A rate-limited delivery waits for its slot.
            if let Some(slot) = cleared.slot {
                if let Err(held) = admit::wait_for_slot(&run, &ready.subscription, slot).await {
                    return Ok(settle::settle_held(&run, held).await?);
                }
            }
            let health = cleared.health;
            // 4. Post, then 5. record what it leaves on the subscription;
            // the service's own fault is no attempt: deferred, told to its
            // operators, nothing counted against the subscription.
            let posted = match prepare::post(&run, &ready, span.context()).await {
                Ok(posted) => posted,
                Err(fault) => return Ok(settle::service_fault(&run, fault).await?),
            };
            record::record(&run, ready.subscription, health, posted).await
        }
    };
    // 6. Decide the notification's fate.
    let verdict = decide(
        &attempted.attempt,
        lease.attempt,
        run.now,
        &app.config.retry_schedule,
        run.random,
    );
    settle::count(&run, &verdict, attempted.call_ms());
    span.set("webhooks.outcome", verdict.label());
    // 7. Remember it in the history, 8. settle the lease, 9. tell.
    let told = attempted.told();
    settle::remember(&run, &attempted.attempt, attempted.made, &verdict).await?;
    settle::settle(&run, &verdict).await?;
    if let Some(told) = told {
        told.tell(app, outbox, &lease.job, &attempted.attempt, &verdict)
            .await;
    }
    if !queue.caps_leases() {
        // How long the slot was held (call and bookkeeping): what spaces
        // the turns of the subscription's jobs over its cap.
        let held = app.clock.now_ms().saturating_sub(run.now);
        app.in_flight
            .observe(&lease.job.subscription_id, u64::try_from(held).unwrap_or(0));
    }
    Ok(verdict)
}

/// One job on its way through the pipeline: what every step reads.
pub struct Run<'a> {
    /// The service's state: configuration, store, history, callbacks, clock.
    pub app: &'a App,
    /// The queue the job was leased from, where it is settled.
    pub queue: &'a dyn DeliveryQueue,
    /// The job and its attempt number.
    pub lease: &'a Lease,
    /// When the delivery started (epoch ms).
    pub now: i64,
    /// One draw in `[0, 1]`, spreading this job's waits and retry.
    pub random: f64,
}

impl<'a> Run<'a> {
    /// A delivery of `lease` starting now, with a fresh draw.
    pub fn new(app: &'a App, queue: &'a dyn DeliveryQueue, lease: &'a Lease) -> Self {
        let random =
            u32::from_le_bytes(crate::secret::random_bytes::<4>()) as f64 / u32::MAX as f64;
        Run {
            now: app.clock.now_ms(),
            app,
            queue,
            lease,
            random,
        }
    }

    /// The job being delivered.
    pub fn job(&self) -> &'a DeliveryJob {
        &self.lease.job
    }

    /// A person's resend or recover (its first attempt), not the schedule.
    pub fn manual(&self) -> bool {
        outcome::trigger(self.lease) == Trigger::Manual
    }
}

/// The lease of a job kept in its line (SQS FIFO), its attempt numbered
/// from the history: the attempts the summary counts now, less those it
/// counted when the job was made ([`DeliveryJob::history_attempts`]), plus
/// one. Every attempt is recorded before its lease is settled, so the count
/// is never behind (the read is strongly consistent); a deferral records
/// nothing, so it counts nothing, unlike SQS's receive count. Without a
/// summary (none recorded, or expired), the queue's own count stands. A
/// resend or recover received for the first time (the queue's count is 1)
/// is its first attempt, whatever the notification's earlier message (ahead
/// of it in the line) attempted since it was queued; its retries count
/// those too.
fn in_line(lease: &Lease, summary: Option<&NotificationSummary>) -> Lease {
    let first_manual = lease.job.trigger == Trigger::Manual && lease.attempt <= 1;
    let attempt = match summary {
        Some(_) if first_manual => 1,
        Some(s) => s.attempts.saturating_sub(lease.job.history_attempts) + 1,
        None => lease.attempt,
    };
    Lease {
        attempt,
        ..lease.clone()
    }
}

/// A job kept in its line comes back when its visibility ends, which SQS
/// caps at 12 hours: one back before its retry's time (the summary's next
/// attempt, more than a second ahead) is deferred to it. Not a resend or
/// recover, whose summary still shows the retry it replaces until it is
/// marked PENDING.
fn line_wait(run: &Run<'_>, summary: &NotificationSummary) -> Option<i64> {
    if run.manual() || summary.status != NotificationStatus::Pending {
        return None;
    }
    summary.next_attempt_at.filter(|at| *at > run.now + 1_000)
}

/// A scheduled retry of a notification that a resend delivered meanwhile
/// (SQS keeps the old message; the SQLite queue replaces it). A scheduled
/// job kept in its line, whose summary was read (`summary`), is also done
/// with once the history shows it delivered or finally failed: its message
/// came back because completing it failed or the process stopped in
/// between. (A resend's is not: the message ahead of it may have failed
/// for good meanwhile, and the resend asks for another try.)
async fn superseded(run: &Run<'_>, summary: Option<&NotificationSummary>) -> bool {
    if run.lease.attempt < 2 {
        return false;
    }
    if let Some(s) = summary {
        return run.job().trigger == Trigger::Scheduled && s.status != NotificationStatus::Pending;
    }
    let job = run.job();
    matches!(
        run.app.history.get(&job.org_id, &job.subscription_id, &job.id).await,
        Ok(Some(d)) if d.summary.status == NotificationStatus::Delivered
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(attempts: u32) -> NotificationSummary {
        NotificationSummary {
            id: "n".into(),
            subscription_id: "s".into(),
            event_id: "e".into(),
            event: String::new(),
            created_at: 1,
            status: NotificationStatus::Pending,
            attempts,
            last_attempt_at: None,
            next_attempt_at: None,
            last_http_status: None,
            last_code: None,
        }
    }

    fn lease(trigger: Trigger, history_attempts: u32, received: u32) -> Lease {
        let mut job = DeliveryJob::new("n".into(), "o".into(), "s".into(), "{}".into(), 1);
        job.trigger = trigger;
        job.ordered = true;
        job.history_attempts = history_attempts;
        Lease {
            job,
            attempt: received,
            receipt: "fifo:r".into(),
            slot: None,
        }
    }

    #[test]
    fn a_lease_in_line_is_numbered_from_the_history_not_the_receive_count() {
        // Received 7 times (deferrals among them), 2 attempts recorded: the third.
        let l = in_line(&lease(Trigger::Scheduled, 0, 7), Some(&summary(2)));
        assert_eq!(l.attempt, 3);
        assert_eq!(l.receipt, "fifo:r");
        // A resend queued after 4 attempts, 1 made since: its second.
        assert_eq!(
            in_line(&lease(Trigger::Manual, 4, 3), Some(&summary(5))).attempt,
            2
        );
        // Its first receive is its first attempt, whatever was attempted meanwhile.
        assert_eq!(
            in_line(&lease(Trigger::Manual, 4, 1), Some(&summary(6))).attempt,
            1
        );
        // No summary: the queue's count stands.
        assert_eq!(in_line(&lease(Trigger::Scheduled, 0, 2), None).attempt, 2);
    }
}
