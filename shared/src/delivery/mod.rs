//! Delivering one notification, the same way on every runtime (SQLite
//! workers, the SQS poller of `webhooks-local --backend aws`, the
//! `deliver-notifications` Lambda): [`deliver`] runs the steps
//!
//! 0. [`admit`]: tenant isolation. A job that is not due yet, whose
//!    subscription has its cap of calls in flight ([`in_flight`]), or whose
//!    circuit breaker is open ([`breaker`]) is deferred: not attempted,
//!    nothing recorded, no attempt counted;
//! 1. [`prepare`]: read the subscription, check it is deliverable, its key
//!    and its callback target (the address policy), and ask its breaker
//!    ([`gate`]: closed, or this attempt is the half-open probe);
//! 2. post: sign and POST ([`CallbackClient::post`](crate::callback::CallbackClient::post));
//! 3. [`record`]: the subscription's failure bookkeeping (streak, blacklist);
//! 4. [`decide`]: a pure function from what happened to a [`Verdict`];
//! 5. [`remember`]: the attempt and the notification's new state in the
//!    delivery history (`outcome.rs`);
//! 6. [`settle`]: complete, retry later or dead-letter the queue's lease;
//! 7. tell: what the subscription's organization is told about it
//!    (`notices.rs`, [`crate::notice`]): failing, recovered, disabled, a
//!    notification exhausted. Only failures and the first success after
//!    them get here with something to say; a healthy delivery costs nothing.
//!
//! The history is written before the lease is settled: if it cannot be, the
//! lease is left to run out and the notification is attempted again, so a
//! crash or a store failure can duplicate an attempt but never lose an
//! outcome. Runtimes only lease jobs and call [`deliver`].

pub mod breaker;
pub mod decide;
pub mod health_cache;
pub mod in_flight;
pub mod isolation;
mod notices;
pub mod outcome;
pub mod streak;
pub mod worker;

use std::time::Duration;

pub use decide::{decide, AfterFailure, Attempt, Verdict};
pub use isolation::{admit, gate};
pub use worker::run_workers;

use isolation::{remember_health, settled_held};

use crate::app::App;
use crate::callback::post::{Posted, SignedNotification};
use crate::callback::{CallFailure, CallbackTarget, UriProblem};
use crate::model::SubscriptionStatus;
use crate::queue::{DeliveryJob, DeliveryQueue, Lease, Outbox, QueueError, StoreOrQueueError};
use crate::signature::{signature_header, SigningKey};
use crate::store::{DeliveryRecord, StoredSubscription};
use crate::telemetry::trace::TraceParent;

/// Attempts one delivery, records it and settles the lease with the verdict.
pub async fn deliver(
    app: &App,
    queue: &dyn DeliveryQueue,
    outbox: &dyn Outbox,
    lease: &Lease,
) -> Result<Verdict, StoreOrQueueError> {
    let now = app.clock.now_ms();
    let random = u32::from_le_bytes(crate::secret::random_bytes::<4>()) as f64 / u32::MAX as f64;
    let _slot = match admit(app, queue, lease, now, random).await {
        Ok(slot) => slot,
        Err(verdict) => return Ok(settled_held(app, queue, lease, verdict, now).await?),
    };
    if superseded(app, lease).await {
        let verdict = Verdict::Drop("delivered meanwhile (a resend)".into());
        return Ok(settled(queue, lease, verdict, now).await?);
    }
    let mut span =
        crate::telemetry::trace::attempt_span(lease.job.traceparent.as_deref(), lease.attempt);
    let (attempt, made, sent) = match prepare(app, &lease.job, now).await {
        Ok(ready) => {
            let health = match gate(app, queue, &ready.subscription, lease, now, random).await {
                Ok(health) => health,
                Err(verdict) => return Ok(settled_held(app, queue, lease, verdict, now).await?),
            };
            let posted = post(app, &ready, &lease.job, now, span.context()).await;
            let made = outcome::attempt_record(&posted, outcome::trigger(lease), now);
            let signal = isolation::signal(&posted);
            let attempt = record(app, &ready.subscription, &posted, now).await;
            let ended = app.clock.now_ms();
            let health =
                remember_health(app, queue, &ready.subscription, health, &signal, ended).await;
            (attempt, Some(made), Some((ready.subscription, health)))
        }
        Err(not_sent) => (not_sent, None, None),
    };
    let verdict = decide(
        &attempt,
        lease.attempt,
        now,
        &app.config.retry_schedule,
        random,
    );
    let call_ms = made.as_ref().map(|m| m.duration_ms);
    count(&verdict, call_ms, lease.job.created_at, now);
    span.set("webhooks.outcome", verdict.label());
    let told = sent.map(|(subject, health)| notices::Told {
        subject,
        health,
        made: made.clone(),
    });
    remember(app, &lease.job, &attempt, made, &verdict).await?;
    settle(queue, lease, &verdict, now).await?;
    if let Some(told) = told {
        told.tell(app, outbox, &lease.job, &attempt, &verdict).await;
    }
    Ok(verdict)
}

async fn settled(
    queue: &dyn DeliveryQueue,
    lease: &Lease,
    verdict: Verdict,
    now: i64,
) -> Result<Verdict, QueueError> {
    settle(queue, lease, &verdict, now).await?;
    Ok(verdict)
}

/// Counts a decided verdict: its `outcome`, the callback call's duration
/// (`call_ms`, none when nothing was sent) and, for a delivery, its lag
/// from the notification's creation to the answer (start + call).
pub(crate) fn count(verdict: &Verdict, call_ms: Option<u64>, created_at: i64, started: i64) {
    let call = call_ms.map(Duration::from_millis);
    let lag = lag(verdict, call_ms, created_at, started);
    crate::telemetry::metrics::delivery_attempt(verdict.label(), call, lag);
}

/// A delivery's lag: from the notification's creation to the 2xx answer
/// (None for any other verdict, or when nothing was sent).
pub fn lag(
    verdict: &Verdict,
    call_ms: Option<u64>,
    created_at: i64,
    started: i64,
) -> Option<Duration> {
    let answered = started.saturating_add(i64::try_from(call_ms?).ok()?);
    (matches!(verdict, Verdict::Delivered) && created_at > 0)
        .then(|| Duration::from_millis(u64::try_from(answered - created_at).unwrap_or(0)))
}

/// A scheduled retry of a notification that a resend delivered meanwhile
/// (SQS keeps the old message; the SQLite queue replaces it).
async fn superseded(app: &App, lease: &Lease) -> bool {
    if lease.attempt < 2 {
        return false;
    }
    let job = &lease.job;
    matches!(
        app.history.get(&job.org_id, &job.subscription_id, &job.id).await,
        Ok(Some(d)) if d.summary.status == crate::history::NotificationStatus::Delivered
    )
}

/// Step 5: the attempt and the notification's new state, in the history.
pub async fn remember(
    app: &App,
    job: &DeliveryJob,
    attempt: &Attempt,
    made: Option<crate::history::AttemptRecord>,
    verdict: &Verdict,
) -> Result<(), StoreOrQueueError> {
    let Some(outcome) = outcome::of(attempt, made, verdict) else {
        return Ok(());
    };
    app.history
        .record_outcome(job, &outcome)
        .await
        .map_err(|e| {
            crate::telemetry::metrics::store_error(e.kind());
            StoreOrQueueError::Store(e)
        })
}

/// A notification ready to be sent.
pub struct Ready {
    /// The subscription the notification goes to, as stored.
    pub subscription: StoredSubscription,
    /// The current secret's key first, then those of the replaced secrets
    /// still in their grace period: the notification is signed with each.
    pub keys: Vec<SigningKey>,
    /// The checked callback, or why the policy refused it (a failed attempt).
    pub target: Result<CallbackTarget, CallFailure>,
}

/// Step 1: what sending needs, or why it is not sent.
pub async fn prepare(app: &App, job: &DeliveryJob, now: i64) -> Result<Ready, Attempt> {
    let subscription = match app
        .store
        .get_subscription(&job.org_id, &job.subscription_id)
        .await
    {
        Ok(Some(sub)) => sub,
        Ok(None) => return Err(Attempt::Unwanted("the subscription was deleted".into())),
        Err(e) => {
            crate::telemetry::metrics::store_error(e.kind());
            return Err(Attempt::StoreUnavailable(format!("store unavailable: {e}")));
        }
    };
    if subscription.status != SubscriptionStatus::Active {
        return Err(Attempt::Unwanted(format!(
            "the subscription is {}",
            subscription.status.as_str()
        )));
    }
    if subscription.expires_at <= now {
        return Err(Attempt::Unwanted("the subscription has expired".into()));
    }
    let Ok(key) = SigningKey::from_secret(&subscription.secret) else {
        return Err(Attempt::Unsendable(
            "the subscription's signing secret is unusable".into(),
        ));
    };
    // A replaced secret that cannot be decoded is left out (it could not
    // have been verified either); the current one always signs.
    let keys = std::iter::once(key)
        .chain(
            subscription
                .signing_secrets(now)
                .skip(1)
                .filter_map(|secret| SigningKey::from_secret(secret).ok()),
        )
        .collect();
    let target = match app.callbacks.policy.check_uri(&subscription.uri) {
        Ok(target) => Ok(target),
        Err(UriProblem::Forbidden(_)) => Err(CallFailure::AddressForbidden),
        Err(UriProblem::Invalid(m)) => {
            return Err(Attempt::Unsendable(format!(
                "the callback uri is invalid: {m}"
            )))
        }
    };
    Ok(Ready {
        subscription,
        keys,
        target,
    })
}

/// Step 2: sign and POST (a refused target is a failed attempt, not a call).
async fn post(app: &App, ready: &Ready, job: &DeliveryJob, now: i64, trace: TraceParent) -> Posted {
    let target = match &ready.target {
        Ok(target) => target,
        Err(failure) => {
            return Posted::Failed {
                failure: *failure,
                elapsed: Duration::ZERO,
            }
        }
    };
    let timestamp = now / 1000;
    let notification = SignedNotification {
        id: job.id.as_str(),
        timestamp,
        signature: signature_header(&ready.keys, job.id.as_str(), timestamp, job.body.as_bytes()),
        body: &job.body,
        traceparent: Some(trace.header()),
    };
    app.callbacks
        .post(target, notification, app.config.delivery_timeout)
        .await
}

/// Step 3: the subscription's bookkeeping for what the POST produced. A 2xx
/// ends a failure streak; a 410 blacklists; another failure starts or
/// extends the streak, which blacklists once older than the configured time.
pub async fn record(
    app: &App,
    subscription: &StoredSubscription,
    posted: &Posted,
    now: i64,
) -> Attempt {
    let (reason, retry_after) = match posted {
        Posted::Answered { status, .. } if (200..300).contains(status) => {
            if subscription.failing_since.is_some() {
                let _ = app
                    .store
                    .record_delivery(
                        &subscription.org_id,
                        &subscription.id,
                        DeliveryRecord::Succeeded,
                    )
                    .await;
            }
            return Attempt::Succeeded;
        }
        Posted::Answered { status: 410, .. } => {
            let _ = app
                .store
                .record_delivery(&subscription.org_id, &subscription.id, DeliveryRecord::Gone)
                .await;
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
            (format!("status {status}"), hint)
        }
        Posted::Failed { failure, .. } => (failure.code().as_str().to_owned(), None),
    };
    let failed = DeliveryRecord::Failed {
        now,
        blacklist_after_ms: crate::clock::millis(app.config.blacklist_after),
    };
    let after = app
        .store
        .record_delivery(&subscription.org_id, &subscription.id, failed)
        .await;
    Attempt::Failed {
        reason,
        retry_after,
        subscription: match after {
            Ok(Some(SubscriptionStatus::Blacklisted)) => AfterFailure::Blacklisted,
            Ok(None) => AfterFailure::Deleted,
            // Unknown (the store did not answer) counts as deliverable: retry.
            _ => AfterFailure::Deliverable,
        },
    }
}

/// Step 6: applies the verdict to the lease.
pub async fn settle(
    queue: &dyn DeliveryQueue,
    lease: &Lease,
    verdict: &Verdict,
    now: i64,
) -> Result<(), QueueError> {
    let job = &lease.job;
    match verdict {
        Verdict::Delivered => {
            tracing::debug!(notification = %job.id, subscription_id = %job.subscription_id, attempt = lease.attempt, "delivered");
            queue.complete(lease).await
        }
        Verdict::Drop(reason) => {
            tracing::info!(notification = %job.id, subscription_id = %job.subscription_id, org_id = %job.org_id, %reason, "notification dropped");
            queue.complete(lease).await
        }
        Verdict::Retry { at, reason } => {
            let delay = Duration::from_millis(u64::try_from(at - now).unwrap_or(0));
            tracing::info!(notification = %job.id, subscription_id = %job.subscription_id, org_id = %job.org_id, attempt = lease.attempt, delay_ms = delay.as_millis() as u64, %reason, "delivery failed, will retry");
            queue.retry_after(lease, delay).await
        }
        Verdict::Defer { at, reason } => {
            let delay = Duration::from_millis(u64::try_from(at - now).unwrap_or(0));
            tracing::debug!(notification = %job.id, subscription_id = %job.subscription_id, delay_ms = delay.as_millis() as u64, %reason, "deferred");
            queue.defer(lease, delay).await
        }
        Verdict::Park { at, reason } => {
            let delay = Duration::from_millis(u64::try_from(at - now).unwrap_or(0));
            tracing::debug!(notification = %job.id, subscription_id = %job.subscription_id, %reason, "parked");
            queue.park(lease, delay).await
        }
        Verdict::Dead(reason) | Verdict::Blacklist(reason) => {
            tracing::warn!(notification = %job.id, subscription_id = %job.subscription_id, org_id = %job.org_id, attempt = lease.attempt, %reason, "notification dead-lettered");
            queue.dead_letter(lease, reason).await
        }
    }
}
