//! Step 3 of [`deliver`](super), the subscription read: whether its
//! attempt goes now. The receiver's pause holds it until it ends; its
//! breaker as stored lets the attempt through, or makes it the half-open
//! probe, or holds it; a rate-limited subscription's attempt takes its slot
//! and waits for it. docs/decisions/tenant-isolation.md.

use super::found::{Closed, Found, Verdict};
use super::reason::Reason;
use super::run::Run;
use crate::health::rate::{self, Reserved};
use crate::health::Health;
use crate::ids::SubscriptionId;
use crate::store::StoredSubscription;

/// What the gate found: the breaker's health the attempt goes out with, or
/// why it is held; and the breaker, if it was closed with jobs parked.
pub struct Gated {
    /// The subscription's health as the attempt starts, or why it does not.
    pub passed: Result<Health, Found>,
    /// A closed breaker's parked jobs, to put back once the job is settled.
    pub closed: Option<Closed>,
}

/// Step 3: the breaker and the rate limit let the attempt through
/// ([`clear`]), and a rate-limited one waits for its slot
/// ([`wait_for_slot`]).
pub async fn gate(run: &Run<'_>, subscription: &StoredSubscription) -> Gated {
    let health = &subscription.health;
    let closed = health
        .must_unpark(run.now)
        .then(|| (health.clone(), run.now));
    let passed = match clear(run, subscription).await {
        Err(held) => Err(held),
        Ok(cleared) => match cleared.slot {
            None => Ok(cleared.health),
            Some(slot) => match wait_for_slot(run, subscription, slot).await {
                Ok(()) => Ok(cleared.health),
                Err(held) => Err(Found::Held(held)),
            },
        },
    };
    Gated { passed, closed }
}

/// What the gate lets through: the breaker's state the attempt goes out
/// with, and the rate-limit slot it waits for ([`wait_for_slot`]).
struct Cleared {
    /// The subscription's health as the attempt starts.
    health: Health,
    /// When the attempt may start (epoch ms), for a rate-limited subscription.
    slot: Option<i64>,
}

/// The receiver's pause (held until it ends, whatever the breaker), then
/// the breaker as stored, then the rate limit ([`rate_limit`]). Closed lets
/// the attempt through; open holds it; half-open lets it through if it wins
/// the probe (compare-and-set, so one probe at a time across every worker
/// and instance).
async fn clear(run: &Run<'_>, subscription: &StoredSubscription) -> Result<Cleared, Found> {
    let (app, now) = (run.app, run.now);
    let health = &subscription.health;
    let (org, id) = (&subscription.org_id, &subscription.id);
    app.breakers.remember(id, health, now);
    if let Some(at) = health.pause_wait(now, run.random) {
        let reason = Reason::Paused;
        return Err(Found::Held(Verdict::Defer { at, reason }));
    }
    let manual = run.manual();
    if let Some(at) = health.wait_until(now, run.random, manual) {
        let health = Box::new(health.clone());
        return Err(Found::BreakerOpen { health, at });
    }
    let slot = match subscription.rate_limit {
        Some(limit) => rate_limit(run, id, limit).await.map_err(Found::Held)?,
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
        _ => Err(Found::Held(Verdict::Defer {
            at: now + crate::clock::millis(probe_lease) / 2 + (1000.0 * run.random) as i64,
            reason: Reason::BreakerOpen,
        })),
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
async fn wait_for_slot(
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
