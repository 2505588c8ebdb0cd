//! Tenant isolation, step 0 and step 1's gate of [`deliver`](super::deliver):
//! the per-subscription cap ([`super::in_flight`]), the circuit breaker
//! ([`super::breaker`]) as stored and as remembered, holding a job while it
//! is open (one kept to probe, the others parked), putting parked jobs back
//! when it closes, and recording what an attempt says about the callback.
//! ARCHITECTURE.md, "Tenant isolation".

use super::{breaker, in_flight, outcome, settle, Verdict};
use crate::app::App;
use crate::callback::post::Posted;
use crate::callback::CallFailure;
use crate::ids::{OrgId, SubscriptionId};
use crate::queue::{DeliveryQueue, Lease, QueueError};
use crate::store::StoredSubscription;

/// The shortest wait of a job over its subscription's cap.
const CAP_WAIT_MS: i64 = 1_000;

/// Step 0, before anything is read: a job that is not due yet (a wait in
/// hops, SQS), over its subscription's cap of calls in flight, or of a
/// subscription whose breaker this process saw open lately is deferred.
/// Otherwise the slot it holds until the delivery is settled.
pub async fn admit(
    app: &App,
    queue: &dyn DeliveryQueue,
    lease: &Lease,
    now: i64,
    random: f64,
) -> Result<Option<in_flight::Slot>, Verdict> {
    let job = &lease.job;
    if let Some(due) = job.not_before.filter(|due| *due > now) {
        return Err(Verdict::Defer {
            at: due,
            reason: "not due yet".into(),
        });
    }
    let manual = outcome::trigger(lease) == crate::history::Trigger::Manual;
    if let Some(known) = app.breakers.fresh(&job.subscription_id, now) {
        if let Some(at) = known.wait_until(now, random, manual) {
            let (org, id) = (&job.org_id, &job.subscription_id);
            return Err(hold(app, queue, org, id, known, at, now).await);
        }
    }
    if queue.caps_leases() {
        // The queue leased it within the cap (SQLite): counting here too
        // would race its count (a job leaves it when its outcome is
        // written, before the delivery returns) and defer for nothing.
        return Ok(None);
    }
    let timeout = crate::clock::millis(app.config.delivery_timeout);
    app.in_flight
        .try_acquire(&job.subscription_id)
        .map(Some)
        .ok_or_else(|| Verdict::Defer {
            // A slot frees when a call ends, within a delivery timeout; the
            // wait is spread over two of them so that the jobs over the cap
            // (many, when the callback hangs) come back a few at a time.
            at: now + (timeout / 2 + (2.0 * timeout as f64 * random) as i64).max(CAP_WAIT_MS),
            reason: format!(
                "{} calls in flight to this subscription (WEBHOOKS_MAX_IN_FLIGHT_PER_SUBSCRIPTION)",
                app.in_flight.cap()
            ),
        })
}

/// Step 1's question to the subscription's breaker as stored: closed lets
/// the attempt through; open defers it; half-open lets it through if it
/// wins the probe (compare-and-set, so one probe at a time across every
/// worker and instance). The breaker's state the attempt goes out with.
pub async fn gate(
    app: &App,
    queue: &dyn DeliveryQueue,
    subscription: &StoredSubscription,
    lease: &Lease,
    now: i64,
    random: f64,
) -> Result<breaker::Health, Verdict> {
    let health = &subscription.health;
    let (org, id) = (&subscription.org_id, &subscription.id);
    app.breakers.remember(id, health, now);
    if health.must_unpark(now) {
        unpark(app, queue, org, id, health.clone(), now).await;
    }
    let manual = outcome::trigger(lease) == crate::history::Trigger::Manual;
    let open = |at: i64| Verdict::Defer {
        at,
        reason: "the subscription's circuit breaker is open".into(),
    };
    if let Some(at) = health.wait_until(now, random, manual) {
        return Err(hold(app, queue, org, id, health.clone(), at, now).await);
    }
    let probe_lease = app.config.delivery_timeout + std::time::Duration::from_secs(5);
    let Some(probing) = health.claim_probe(now, probe_lease, manual) else {
        return Ok(health.clone()); // closed
    };
    let won = app
        .store
        .update_health(&subscription.org_id, &subscription.id, health.rev, &probing)
        .await;
    match won {
        Ok(true) => {
            tracing::info!(subscription_id = %subscription.id, org_id = %subscription.org_id, "circuit breaker half-open: probing");
            app.breakers.remember(&subscription.id, &probing, now);
            Ok(probing)
        }
        // Another worker probes (or the store cannot tell): wait for it.
        _ => Err(open(
            now + crate::clock::millis(probe_lease) / 2 + (1000.0 * random) as i64,
        )),
    }
}

/// After an attempt: the breaker's new state, written compare-and-set
/// (re-read and applied again when another worker wrote first). A store
/// that cannot be written loses a count, never a notification.
/// What an attempt says about the callback's health: timeouts, connection,
/// DNS and TLS failures and 5xx look like an outage; a 4xx is the receiver
/// answering; a refused address is our policy, not its health.
pub fn signal(posted: &Posted) -> breaker::Signal {
    match posted {
        Posted::Answered { status, .. } if *status >= 500 => {
            breaker::Signal::Outage(format!("status {status}"))
        }
        Posted::Answered { status, .. } if (200..300).contains(status) => {
            breaker::Signal::Delivered
        }
        Posted::Answered { .. } => breaker::Signal::Reachable,
        Posted::Failed {
            failure: CallFailure::AddressForbidden,
            ..
        } => breaker::Signal::Neutral,
        Posted::Failed { failure, .. } => {
            breaker::Signal::Outage(failure.code().as_str().to_owned())
        }
    }
}

/// Writes the health an attempt leaves (compare-and-set, read again on a
/// conflict); returns the change written, `(before, after)`, if any.
pub(super) async fn remember_health(
    app: &App,
    queue: &dyn DeliveryQueue,
    subscription: &StoredSubscription,
    mut current: breaker::Health,
    signal: &breaker::Signal,
    now: i64,
) -> Option<(breaker::Health, breaker::Health)> {
    for _ in 0..4 {
        let next = current.after(signal, &app.config.breaker, now)?;
        let (org, id) = (&subscription.org_id, &subscription.id);
        match app.store.update_health(org, id, current.rev, &next).await {
            Ok(true) => {
                let (was, is) = (current.state(now), next.state(now));
                if was.as_str() != is.as_str() {
                    tracing::warn!(subscription_id = %id, org_id = %org, from = was.as_str(), to = is.as_str(),
                        failures = next.failures, last_failure = next.last_failure.as_deref().unwrap_or(""),
                        "circuit breaker changed");
                }
                app.breakers.remember(id, &next, now);
                if next.must_unpark(now) {
                    unpark(app, queue, org, id, next.clone(), now).await;
                }
                return Some((current, next));
            }
            Ok(false) => match app.store.get_subscription(org, id).await {
                Ok(Some(fresh)) => current = fresh.health,
                _ => return None,
            },
            Err(e) => {
                tracing::warn!(subscription_id = %id, error = %e, "cannot record the circuit breaker's state");
                return None;
            }
        }
    }
    None
}

/// A job its subscription's open breaker holds until `at`: while open, one
/// job is kept in the queue to probe when the cool-down ends (the waker,
/// claimed compare-and-set); the others are parked, where the queue parks.
/// Half-open with a probe in flight, it is deferred past the probe.
async fn hold(
    app: &App,
    queue: &dyn DeliveryQueue,
    org: &OrgId,
    id: &SubscriptionId,
    mut health: breaker::Health,
    at: i64,
    now: i64,
) -> Verdict {
    let reason = "the subscription's circuit breaker is open".to_owned();
    if !queue.parks() {
        return Verdict::Defer { at, reason };
    }
    for _ in 0..3 {
        if !matches!(health.state(now), breaker::BreakerState::Open { .. }) {
            break;
        }
        let Some(waker) = health.claim_waker(now, at) else {
            return Verdict::Park { at, reason };
        };
        match app.store.update_health(org, id, health.rev, &waker).await {
            Ok(true) => {
                app.breakers.remember(id, &waker, now);
                let reason = format!("{reason}; kept in the queue to probe");
                return Verdict::Defer { at, reason };
            }
            Ok(false) => match app.store.get_subscription(org, id).await {
                Ok(Some(fresh)) => health = fresh.health,
                _ => break,
            },
            Err(_) => break,
        }
    }
    Verdict::Defer { at, reason }
}

/// Settles a job held before its attempt. A parked job whose breaker closed
/// meanwhile (the close may have listed the parked jobs before this one was
/// parked) is put back at once: a job is parked before this read, and a
/// close lists them after its write, so every parked job is either listed
/// by a close or sees it.
pub(super) async fn settled_held(
    app: &App,
    queue: &dyn DeliveryQueue,
    lease: &Lease,
    verdict: Verdict,
    now: i64,
) -> Result<Verdict, QueueError> {
    settle(queue, lease, &verdict, now).await?;
    super::count(&verdict, None, lease.job.created_at, now);
    if matches!(verdict, Verdict::Park { .. }) {
        let (org, id) = (&lease.job.org_id, &lease.job.subscription_id);
        if let Ok(Some(sub)) = app.store.get_subscription(org, id).await {
            let at = app.clock.now_ms();
            app.breakers.remember(id, &sub.health, at);
            if sub.health.state(at) == breaker::BreakerState::Closed {
                unpark(app, queue, org, id, sub.health, at).await;
            }
        }
    }
    Ok(verdict)
}

/// Puts a closed breaker's parked jobs back in the queue, then clears its
/// `parked` mark; a failure leaves the mark, so the next delivery of the
/// subscription tries again.
async fn unpark(
    app: &App,
    queue: &dyn DeliveryQueue,
    org: &OrgId,
    id: &SubscriptionId,
    health: breaker::Health,
    now: i64,
) {
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
