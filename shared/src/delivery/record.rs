//! Step 5 of [`deliver`](super::deliver): what the POST leaves on the
//! subscription. Its failure bookkeeping ([`Store::record_delivery`]: a 2xx
//! ends a failure streak, a 410 blacklists, another failure starts or
//! extends the streak, which blacklists once older than
//! `WEBHOOKS_BLACKLIST_AFTER`), then its breaker's health: what the attempt
//! says about the callback ([`signal`]), written compare-and-set; a breaker
//! that closes puts its parked jobs back.
//!
//! [`Store::record_delivery`]: crate::store::Store::record_delivery

use super::tell::Told;
use super::{outcome, parking, AfterFailure, Attempt, Run};
use crate::callback::post::Posted;
use crate::failure::{CallFailure, Failure};
use crate::health::{Health, Signal};
use crate::history::AttemptRecord;
use crate::model::SubscriptionStatus;
use crate::store::{DeliveryRecord, StoredSubscription};

/// What an attempt left: what it found ([`decide`](super::decide)'s
/// input), the history's record of its POST, and, when it was sent, the
/// subscription and the health change its organization may be told of.
pub struct Attempted {
    /// What the attempt found.
    pub attempt: Attempt,
    /// The record of the POST; none when nothing was sent.
    pub made: Option<AttemptRecord>,
    /// The subscription as read before the attempt, and the health change
    /// the attempt wrote, `(before, after)`; none when nothing was sent.
    sent: Option<(StoredSubscription, Option<(Health, Health)>)>,
}

impl Attempted {
    /// Nothing was sent: `attempt` says why.
    pub fn unsent(attempt: Attempt) -> Self {
        Attempted {
            attempt,
            made: None,
            sent: None,
        }
    }

    /// How long the callback call took, ms; none when nothing was sent.
    pub fn call_ms(&self) -> Option<u64> {
        self.made.as_ref().map(|m| m.duration_ms)
    }

    /// What the organization may be told of a sent attempt (taken out).
    pub(super) fn told(&mut self) -> Option<Told> {
        let (subject, health) = self.sent.take()?;
        Some(Told {
            subject,
            health,
            made: self.made.clone(),
        })
    }
}

/// Step 5: the subscription's bookkeeping and its breaker's health after
/// the POST that went out with `health`.
pub async fn record(
    run: &Run<'_>,
    subscription: StoredSubscription,
    health: Health,
    posted: Posted,
) -> Attempted {
    let made = outcome::attempt_record(&posted, outcome::trigger(run.lease), run.now);
    let signal = signal(&posted);
    let pause = match &posted {
        Posted::Answered {
            status,
            retry_after,
            ..
        } => super::decide::pause_until(
            *status,
            retry_after.as_deref(),
            run.now,
            &run.app.config.retry_schedule,
        ),
        Posted::Failed { .. } | Posted::Accepted { .. } => None,
    };
    let attempt = bookkeeping(run, &subscription, &posted).await;
    let ended = run.app.clock.now_ms();
    let health = remember_health(run, &subscription, health, &signal, pause, ended).await;
    Attempted {
        attempt,
        made: Some(made),
        sent: Some((subscription, health)),
    }
}

/// The subscription's failure bookkeeping for what the POST produced, and
/// what the attempt found.
async fn bookkeeping(run: &Run<'_>, subscription: &StoredSubscription, posted: &Posted) -> Attempt {
    let store = &run.app.store;
    let (org, id) = (&subscription.org_id, &subscription.id);
    let (failure, retry_after) = match posted {
        Posted::Accepted { .. } => {
            if subscription.failing_since.is_some() {
                let _ = store
                    .record_delivery(org, id, DeliveryRecord::Succeeded)
                    .await;
            }
            return Attempt::Succeeded;
        }
        // The customer's role, queue or bus is refused or gone: disabled at
        // once, as a 410 does, but the notification is kept as a dead
        // letter to recover once they fix it (docs/decisions/destinations.md).
        Posted::Failed { failure, .. } if failure.disables() => {
            let _ = store.record_delivery(org, id, DeliveryRecord::Gone).await;
            return Attempt::Failed {
                failure: Failure::Call(*failure),
                retry_after: None,
                subscription: AfterFailure::Blacklisted,
            };
        }
        Posted::Answered { status, .. } if (200..300).contains(status) => {
            if subscription.failing_since.is_some() {
                let _ = store
                    .record_delivery(org, id, DeliveryRecord::Succeeded)
                    .await;
            }
            return Attempt::Succeeded;
        }
        Posted::Answered { status: 410, .. } => {
            let _ = store.record_delivery(org, id, DeliveryRecord::Gone).await;
            return Attempt::Gone;
        }
        Posted::Answered {
            status,
            retry_after,
            ..
        } => {
            let hint = matches!(status, 429 | 503)
                .then(|| retry_after.clone())
                .flatten();
            (Failure::Status(*status), hint)
        }
        Posted::Failed { failure, .. } => (Failure::Call(*failure), None),
    };
    let failed = DeliveryRecord::Failed {
        now: run.now,
        blacklist_after_ms: crate::clock::millis(run.app.config.blacklist_after),
    };
    let after = store.record_delivery(org, id, failed).await;
    Attempt::Failed {
        failure,
        retry_after,
        subscription: match after {
            Ok(Some(SubscriptionStatus::Blacklisted)) => AfterFailure::Blacklisted,
            Ok(None) => AfterFailure::Deleted,
            // Unknown (the store did not answer) counts as deliverable: retry.
            _ => AfterFailure::Deliverable,
        },
    }
}

/// What an attempt says about the callback's health: timeouts, connection,
/// DNS and TLS failures and 5xx look like an outage; a 4xx is the receiver
/// answering; a refused address is our policy, not its health.
pub fn signal(posted: &Posted) -> Signal {
    match posted {
        Posted::Answered { status, .. } if *status >= 500 => {
            Signal::Outage(Failure::Status(*status))
        }
        Posted::Answered { status, .. } if (200..300).contains(status) => Signal::Delivered,
        Posted::Accepted { .. } => Signal::Delivered,
        Posted::Answered { .. } => Signal::Reachable,
        // The customer's configuration, not an outage: it disables instead.
        Posted::Failed { failure, .. } if failure.disables() => Signal::Neutral,
        Posted::Failed {
            failure: CallFailure::AddressForbidden,
            ..
        } => Signal::Neutral,
        Posted::Failed { failure, .. } => Signal::Outage(Failure::Call(*failure)),
    }
}

/// Writes the health an attempt leaves (compare-and-set, read again on a
/// conflict), with the receiver's `pause` if it asked for one later than
/// the one stored; returns the change written, `(before, after)`, if any.
/// A store that cannot be written loses a count, never a notification.
async fn remember_health(
    run: &Run<'_>,
    subscription: &StoredSubscription,
    mut current: Health,
    signal: &Signal,
    pause: Option<i64>,
    now: i64,
) -> Option<(Health, Health)> {
    let app = run.app;
    let (org, id) = (&subscription.org_id, &subscription.id);
    for _ in 0..4 {
        let after = current.after(signal, &app.config.breaker, now);
        let next = match pause.filter(|until| current.paused_until < Some(*until)) {
            Some(until) => match after {
                Some(next) => Some(Health {
                    paused_until: Some(until.max(next.paused_until.unwrap_or(until))),
                    ..next
                }),
                None => Some(current.pause(until)),
            },
            None => after,
        }?;
        match app.store.update_health(org, id, current.rev, &next).await {
            Ok(true) => {
                let (was, is) = (current.state(now), next.state(now));
                if was.as_str() != is.as_str() {
                    let last_failure = next.last_failure.map(|f| f.to_string());
                    tracing::warn!(subscription_id = %id, org_id = %org, from = was.as_str(), to = is.as_str(),
                        failures = next.failures, last_failure = last_failure.as_deref().unwrap_or(""),
                        "circuit breaker changed");
                }
                app.breakers.remember(id, &next, now);
                if next.must_unpark(now) {
                    parking::unpark(run, org, id, next.clone(), now).await;
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
