//! Step 5 of [`deliver`](super): what the POST leaves on the subscription.
//! Its failure bookkeeping ([`Store::record_delivery`]: a 2xx ends a failure
//! streak, a 410 blacklists, another failure starts or extends the streak,
//! which blacklists once older than `WEBHOOKS_BLACKLIST_AFTER`), then its
//! breaker's health: what the attempt says about the callback ([`signal`]),
//! written compare-and-set; and the history's record of the POST.
//!
//! [`Store::record_delivery`]: crate::store::Store::record_delivery

use std::time::Duration;

use super::decide::pause_until;
use super::found::{AfterFailure, Attempt, Attempted, Closed};
use super::run::Run;
use crate::callback::post::Posted;
use crate::failure::{CallFailure, Failure};
use crate::health::{Health, Signal};
use crate::history::{AttemptRecord, Trigger};
use crate::model::SubscriptionStatus;
use crate::store::{DeliveryRecord, StoredSubscription};

/// Step 5: the subscription's bookkeeping and its breaker's health after
/// the POST that went out with `health`; and the breaker, if the attempt
/// left it closed with jobs parked.
pub async fn record(
    run: &Run<'_>,
    subscription: StoredSubscription,
    health: Health,
    posted: Posted,
) -> (Attempted, Option<Closed>) {
    let made = attempt_record(&posted, run.trigger, run.now);
    let attempt = bookkeeping(run, &subscription, &posted).await;
    let ended = run.app.clock.now_ms();
    let change = remember_health(run, &subscription, health, &posted, ended).await;
    let closed = match &change {
        Some((_, after)) if after.must_unpark(ended) => Some((after.clone(), ended)),
        _ => None,
    };
    let attempted = Attempted {
        attempt,
        made: Some(made),
        sent: Some((subscription, change)),
    };
    (attempted, closed)
}

/// The record of one POST started at `at`.
pub fn attempt_record(posted: &Posted, trigger: Trigger, at: i64) -> AttemptRecord {
    let ms = |d: &Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    match posted {
        Posted::Answered {
            status,
            body,
            elapsed,
            ..
        } => AttemptRecord {
            at,
            duration_ms: ms(elapsed),
            http_status: Some(*status),
            code: match status {
                200..=299 => None,
                300..=399 => Some("REDIRECT".into()),
                _ => Some("BAD_STATUS".into()),
            },
            response_body: body.clone(),
            trigger,
        },
        Posted::Accepted { id, elapsed } => AttemptRecord {
            at,
            duration_ms: ms(elapsed),
            http_status: None,
            code: None,
            // The destination's message or event id, where a POST keeps its answer.
            response_body: id.clone(),
            trigger,
        },
        Posted::Failed { failure, elapsed } => AttemptRecord {
            at,
            duration_ms: ms(elapsed),
            http_status: None,
            code: Some(failure.code().as_str().into()),
            response_body: String::new(),
            trigger,
        },
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
/// conflict), with the receiver's pause ([`pause_until`]) if it asked for
/// one later than the one stored; returns the change written, `(before, after)`, if any.
/// A store that cannot be written loses a count, never a notification.
async fn remember_health(
    run: &Run<'_>,
    subscription: &StoredSubscription,
    mut current: Health,
    posted: &Posted,
    now: i64,
) -> Option<(Health, Health)> {
    let app = run.app;
    let signal = &signal(posted);
    let waits = subscription.retry_waits(&app.config.retry_schedule);
    let pause = match posted {
        Posted::Answered {
            status,
            retry_after,
            ..
        } => pause_until(*status, retry_after.as_deref(), run.now, waits),
        Posted::Failed { .. } | Posted::Accepted { .. } => None,
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(status: u16, body: &str) -> Posted {
        Posted::Answered {
            status,
            retry_after: None,
            body: body.into(),
            elapsed: Duration::from_millis(12),
        }
    }

    #[test]
    fn attempts_name_their_failing_step() {
        let ok = attempt_record(&answered(204, ""), Trigger::Manual, 5);
        assert_eq!(
            (ok.code, ok.http_status, ok.duration_ms),
            (None, Some(204), 12)
        );
        assert_eq!(ok.trigger, Trigger::Manual);
        let bad = attempt_record(&answered(500, "<b>no</b>"), Trigger::Scheduled, 5);
        assert_eq!(bad.code.as_deref(), Some("BAD_STATUS"));
        assert_eq!(bad.response_body, "<b>no</b>");
        let moved = attempt_record(&answered(302, ""), Trigger::Scheduled, 5);
        assert_eq!(moved.code.as_deref(), Some("REDIRECT"));
        let timeout = Posted::Failed {
            failure: CallFailure::Timeout,
            elapsed: Duration::from_secs(10),
        };
        let t = attempt_record(&timeout, Trigger::Scheduled, 5);
        assert_eq!((t.code.as_deref(), t.http_status), (Some("TIMEOUT"), None));
    }
}
