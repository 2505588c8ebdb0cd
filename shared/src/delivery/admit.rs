//! Step 1 of [`deliver`](super): whether a job may be attempted now, before
//! anything of its subscription is read. A job kept in its line (an ordered
//! subscription's, on the SQS FIFO queue), its notification's summary read
//! ([`Line`](super::run::Line)), is deferred when back before its retry's time, dropped
//! when already delivered or failed. A job that is not due
//! yet, whose subscription's breaker this process saw open lately, or whose
//! subscription has its cap of calls in flight is held: not attempted,
//! nothing recorded, no attempt counted. docs/decisions/tenant-isolation.md.

use super::found::{Found, Verdict};
use super::reason::Reason;
use super::run::Run;
use crate::health::in_flight::Slot;
use crate::history::{NotificationStatus, NotificationSummary, Trigger};

/// The shortest wait of a job over its subscription's cap.
const CAP_WAIT_MS: i64 = 1_000;

/// Step 1: held when its line says it is back early, when it is not due,
/// when its receiver asked for a pause or its breaker was seen open lately,
/// or when it is over its subscription's cap of calls in flight; dropped
/// when a resend delivered it meanwhile. Otherwise, or when dropped, the
/// slot it holds among its subscription's calls in flight until the
/// delivery is settled (none where the queue caps its leases itself).
pub async fn admit(run: &Run<'_>) -> (Option<Slot>, Option<Found>) {
    if let Some(at) = run.summary.and_then(|s| line_wait(run, s)) {
        let reason = Reason::NotDue;
        return (None, Some(Found::Held(Verdict::Defer { at, reason })));
    }
    match go_now(run) {
        Err(held) => (None, Some(held)),
        Ok(slot) => match superseded(run, run.summary).await {
            true => (slot, Some(Found::Superseded)),
            false => (slot, None),
        },
    }
}

/// A job that is not due yet (a wait in hops, SQS), of a subscription whose
/// receiver asked for a pause or whose breaker this process saw open
/// lately, or over its subscription's cap of calls in flight is held.
/// Otherwise the slot it holds until the delivery is settled (none where
/// the queue caps its leases itself).
fn go_now(run: &Run<'_>) -> Result<Option<Slot>, Found> {
    let (app, job, now) = (run.app, run.job(), run.now);
    if let Some(due) = job.not_before.filter(|due| *due > now) {
        let reason = Reason::NotDue;
        return Err(Found::Held(Verdict::Defer { at: due, reason }));
    }
    if let Some(known) = app.breakers.fresh(&job.subscription_id, now) {
        if let Some(at) = known.pause_wait(now, run.random) {
            let reason = Reason::Paused;
            return Err(Found::Held(Verdict::Defer { at, reason }));
        }
        if let Some(at) = known.wait_until(now, run.random, run.manual()) {
            let health = Box::new(known);
            return Err(Found::BreakerOpen { health, at });
        }
    }
    if run.queue.caps_leases() {
        // The queue leased it within the cap (SQLite): counting here too
        // would race its count (a job leaves it when its outcome is
        // written, before the delivery returns) and defer for nothing.
        return Ok(None);
    }
    match app.in_flight.try_acquire(&job.subscription_id) {
        Some(slot) => Ok(Some(slot)),
        None => Err(Found::Held(Verdict::Defer {
            // Its turn in the subscription's waiting line: turns are one
            // slot apart at the rate its calls end, so a backlog comes back
            // about once a job however deep it is, a few at a time. Before
            // a call of it is seen, one to two seconds.
            at: app.in_flight.turn(
                &job.subscription_id,
                now,
                now + CAP_WAIT_MS + (CAP_WAIT_MS as f64 * run.random) as i64,
            ),
            reason: Reason::AtCap(app.in_flight.cap()),
        })),
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
