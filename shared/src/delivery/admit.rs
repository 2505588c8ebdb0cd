//! Steps 1 and 3 of [`deliver`](super::deliver): whether a job may be
//! attempted now. [`admit`], before anything is read: due, not held by a
//! breaker this process saw open lately, within its subscription's cap of
//! calls in flight. [`gate`], once the subscription is read: its breaker as
//! stored lets the attempt through, or makes it the half-open probe. A job
//! that may not go is held ([`parking::hold`](super::parking::hold)):
//! deferred, kept in the queue to probe, or parked.
//! docs/decisions/tenant-isolation.md.

use super::{parking, Reason, Run, Verdict};
use crate::health::in_flight::Slot;
use crate::health::rate::{self, Reserved};
use crate::health::Health;
use crate::ids::SubscriptionId;
use crate::store::StoredSubscription;

/// The shortest wait of a job over its subscription's cap.
const CAP_WAIT_MS: i64 = 1_000;

/// Step 1, before anything is read: a job that is not due yet (a wait in
/// hops, SQS), of a subscription whose receiver asked for a pause or whose
/// breaker this process saw open lately, or over its subscription's cap of
/// calls in flight is held. Otherwise the slot it holds until the delivery is settled (none where
/// the queue caps its leases itself).
pub async fn admit(run: &Run<'_>) -> Result<Option<Slot>, Verdict> {
    let (app, job, now) = (run.app, run.job(), run.now);
    if let Some(due) = job.not_before.filter(|due| *due > now) {
        return Err(Verdict::Defer {
            at: due,
            reason: Reason::NotDue,
        });
    }
    if let Some(known) = app.breakers.fresh(&job.subscription_id, now) {
        if let Some(at) = known.pause_wait(now, run.random) {
            let reason = Reason::Paused;
            return Err(Verdict::Defer { at, reason });
        }
        if let Some(at) = known.wait_until(now, run.random, run.manual()) {
            let (org, id) = (&job.org_id, &job.subscription_id);
            return Err(parking::hold(run, org, id, known, at).await);
        }
    }
    if run.queue.caps_leases() {
        // The queue leased it within the cap (SQLite): counting here too
        // would race its count (a job leaves it when its outcome is
        // written, before the delivery returns) and defer for nothing.
        return Ok(None);
    }
    app.in_flight
        .try_acquire(&job.subscription_id)
        .map(Some)
        .ok_or_else(|| Verdict::Defer {
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
        })
}

/// What the gate lets through: the breaker's state the attempt goes out
/// with, and the rate-limit slot it waits for ([`wait_for_slot`]).
pub struct Cleared {
    /// The subscription's health as the attempt starts.
    pub health: Health,
    /// When the attempt may start (epoch ms), for a rate-limited subscription.
    pub slot: Option<i64>,
}

/// Step 3, the subscription read: the receiver's pause (held until it
/// ends, whatever the breaker), then its breaker as stored, then its rate
/// limit ([`rate_limit`]). Closed lets the
/// attempt through; open holds it; half-open lets it through if it wins
/// the probe (compare-and-set, so one probe at a time across every worker
/// and instance). A closed breaker with jobs parked puts them back first.
pub async fn gate(run: &Run<'_>, subscription: &StoredSubscription) -> Result<Cleared, Verdict> {
    let (app, now) = (run.app, run.now);
    let health = &subscription.health;
    let (org, id) = (&subscription.org_id, &subscription.id);
    app.breakers.remember(id, health, now);
    if health.must_unpark(now) {
        parking::unpark(run, org, id, health.clone(), now).await;
    }
    if let Some(at) = health.pause_wait(now, run.random) {
        let reason = Reason::Paused;
        return Err(Verdict::Defer { at, reason });
    }
    let manual = run.manual();
    if let Some(at) = health.wait_until(now, run.random, manual) {
        return Err(parking::hold(run, org, id, health.clone(), at).await);
    }
    let slot = match subscription.rate_limit {
        Some(limit) => rate_limit(run, id, limit).await?,
        None => None,
    };
    let cleared = |health: &Health| Cleared {
        health: health.clone(),
        slot,
    };
    let probe_lease = app.config.delivery_timeout + std::time::Duration::from_secs(5);
    let Some(probing) = health.claim_probe(now, probe_lease, manual) else {
        return Ok(cleared(health)); // closed
    };
    let won = app.store.update_health(org, id, health.rev, &probing).await;
    match won {
        Ok(true) => {
            tracing::info!(subscription_id = %id, org_id = %org, "circuit breaker half-open: probing");
            app.breakers.remember(id, &probing, now);
            Ok(cleared(&probing))
        }
        // Another worker probes (or the store cannot tell): wait for it.
        _ => Err(Verdict::Defer {
            at: now + crate::clock::millis(probe_lease) / 2 + (1000.0 * run.random) as i64,
            reason: Reason::BreakerOpen,
        }),
    }
}

/// The subscription's rate-limit slot: the one the lease took where the
/// queue keeps the limit itself (SQLite); else the next one in the store,
/// shared by every process and instance, if it starts within the horizon
/// (`health/rate.rs`). Without one, the job is deferred, no attempt
/// counted, to its turn in this process's line for the subscription
/// ([`RateLines::turn`](crate::health::rate::RateLines::turn)); while the
/// next free slot this process saw is past the horizon, the store is not
/// asked. When the store cannot tell, the job waits a second: the limit
/// holds through an outage.
async fn rate_limit(
    run: &Run<'_>,
    id: &SubscriptionId,
    limit: u32,
) -> Result<Option<i64>, Verdict> {
    if run.queue.limits_rate() {
        return Ok(run.lease.slot);
    }
    let app = run.app;
    // The slot is taken as of now, not as of the delivery's start, and
    // ahead by what the store takes to answer: its answer is back before it.
    let now = app.clock.now_ms();
    let reason = Reason::RateLimited(limit);
    if app.rates.known_full(id, now).is_none() {
        let busy = app.rates.busy(id, now);
        let asked = std::time::Instant::now();
        let at = now + app.rates.lead();
        let reserved = app.store.reserve_rate_slot(id, limit, at, busy).await;
        app.rates
            .took(i64::try_from(asked.elapsed().as_millis()).unwrap_or(i64::MAX));
        match reserved {
            Ok(Reserved::At(at)) => {
                app.rates.saw(id, at * 1_000 + rate::spacing_us(limit));
                return Ok(Some(at));
            }
            Ok(Reserved::Full(next)) => app.rates.saw(id, next),
            Err(e) => {
                crate::telemetry::metrics::store_error(e.kind());
                tracing::warn!(subscription_id = %id, error = %e, "cannot reserve a rate slot: deferred");
                let at = now + 1_000;
                return Err(Verdict::Defer { at, reason });
            }
        }
    }
    // Verdicts' times are reckoned from the delivery's start (`run.now`).
    let at = app.rates.turn(id, limit, now) - (now - run.now);
    Err(Verdict::Defer { at, reason })
}

/// How many slots a delivery of the SQS path takes before it gives up
/// waiting in the process and is deferred.
const SLOT_TRIES: u32 = 3;

/// Between the gate and the POST: a rate-limited delivery waits for its
/// slot (at most the horizon), and goes only if it starts within
/// [`rate::LATE_MS`] of it. Later (the store answered after the slot, or
/// the process was starved meanwhile), it takes another slot: on SQS the
/// next one in the store, up to [`SLOT_TRIES`] slots in all, then it is
/// deferred to its turn; on SQLite it is deferred at once, due now, for the
/// next lease's slot (no attempt counted either way). So what takes a slot
/// is also what decides when the request leaves.
pub async fn wait_for_slot(
    run: &Run<'_>,
    subscription: &StoredSubscription,
    slot: i64,
) -> Result<(), Verdict> {
    let (clock, id) = (&run.app.clock, &subscription.id);
    let limit = subscription.rate_limit.unwrap_or(rate::MAX_RATE_LIMIT);
    let mut slot = slot;
    let mut tries = 1;
    loop {
        let ahead = slot - clock.now_ms();
        if ahead > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(ahead.unsigned_abs())).await;
        }
        let now = clock.now_ms();
        let late = now - slot;
        if late <= rate::LATE_MS {
            return Ok(());
        }
        tracing::debug!(subscription_id = %id, late_ms = late, ahead_ms = ahead, "missed its rate slot");
        if run.queue.limits_rate() || tries >= SLOT_TRIES {
            // Verdicts' times are reckoned from the delivery's start (`run.now`).
            let at = match run.queue.limits_rate() {
                true => run.now,
                false => run.app.rates.turn(id, limit, now) - (now - run.now),
            };
            let reason = Reason::SlotMissed(late);
            return Err(Verdict::Defer { at, reason });
        }
        tries += 1;
        match rate_limit(run, id, limit).await? {
            Some(next) => slot = next,
            None => return Ok(()),
        }
    }
}
