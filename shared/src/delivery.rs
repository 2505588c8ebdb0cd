//! Delivering one notification: sign, POST, and decide what happens next
//! (done, retry later, dead-letter), keeping the subscription's failure
//! bookkeeping. Runtimes only lease jobs and call [`deliver`].

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::StatusCode;
use tokio::sync::{Notify, Semaphore};

use crate::app::{now_ms, App};
use crate::callback::{CallFailure, UriProblem};
use crate::model::SubscriptionStatus;
use crate::queue::{DeliveryQueue, Lease, QueueError};
use crate::signature::SigningKey;
use crate::store::{DeliveryRecord, StoredSubscription};

/// At most this much of a callback's response body is read.
pub const MAX_RESPONSE_BODY: usize = 16 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx answer.
    Delivered,
    /// Failed; try again after `delay`.
    Retry { delay: Duration, reason: String },
    /// Failed for good: keep it in the dead letters.
    DeadLetter(String),
    /// Not sent and never will be (subscription deleted, blacklisted, expired).
    Dropped(String),
}

/// Attempts one delivery and settles the lease accordingly.
pub async fn deliver(
    app: &App,
    queue: &dyn DeliveryQueue,
    lease: &Lease,
) -> Result<Outcome, QueueError> {
    let outcome = attempt(app, lease).await;
    let job = &lease.job;
    match &outcome {
        Outcome::Delivered => {
            tracing::debug!(notification = %job.id, subscription_id = %job.subscription_id, attempt = lease.attempt, "delivered");
            queue.complete(lease).await?;
        }
        Outcome::Dropped(reason) => {
            tracing::info!(notification = %job.id, subscription_id = %job.subscription_id, org_id = %job.org_id, %reason, "notification dropped");
            queue.complete(lease).await?;
        }
        Outcome::Retry { delay, reason } => {
            tracing::info!(notification = %job.id, subscription_id = %job.subscription_id, org_id = %job.org_id, attempt = lease.attempt, delay_ms = delay.as_millis() as u64, %reason, "delivery failed, will retry");
            queue.retry_after(lease, *delay).await?;
        }
        Outcome::DeadLetter(reason) => {
            tracing::warn!(notification = %job.id, subscription_id = %job.subscription_id, org_id = %job.org_id, attempt = lease.attempt, %reason, "notification dead-lettered");
            queue.dead_letter(lease, reason).await?;
        }
    }
    Ok(outcome)
}

/// One attempt, without touching the queue.
pub async fn attempt(app: &App, lease: &Lease) -> Outcome {
    let job = &lease.job;
    let sub = match app
        .store
        .get_subscription(&job.org_id, &job.subscription_id)
        .await
    {
        Ok(Some(sub)) => sub,
        Ok(None) => return Outcome::Dropped("the subscription was deleted".into()),
        Err(e) => return retry_soon(app, format!("store unavailable: {e}")),
    };
    let now = now_ms();
    if sub.status != SubscriptionStatus::Active {
        return Outcome::Dropped(format!("the subscription is {}", sub.status.as_str()));
    }
    if sub.expires_at <= now {
        return Outcome::Dropped("the subscription has expired".into());
    }
    let Ok(key) = SigningKey::from_secret(&sub.secret) else {
        return Outcome::DeadLetter("the subscription's signing secret is unusable".into());
    };
    let url = match app.callbacks.policy.check_uri(&sub.uri) {
        Ok(url) => url,
        Err(UriProblem::Forbidden(_)) => {
            return failed(
                app,
                lease,
                &sub,
                CallFailure::AddressForbidden.code().into(),
                None,
            )
            .await
        }
        Err(UriProblem::Invalid(m)) => {
            return Outcome::DeadLetter(format!("the callback uri is invalid: {m}"))
        }
    };
    let timestamp = now / 1000;
    let signature = key.sign(&job.id, timestamp, job.body.as_bytes());
    let sent = app
        .callbacks
        .http()
        .post(url)
        .header(CONTENT_TYPE, "application/json")
        .header("webhook-id", &job.id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(job.body.clone())
        .timeout(app.config.delivery_timeout)
        .send()
        .await;
    let mut response = match sent {
        Ok(r) => r,
        Err(e) => {
            return failed(
                app,
                lease,
                &sub,
                CallFailure::classify(&e).code().into(),
                None,
            )
            .await
        }
    };
    let status = response.status();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_retry_after);
    // Read a bounded amount so the connection can be reused; never more.
    let mut read = 0;
    while read <= MAX_RESPONSE_BODY {
        match tokio::time::timeout(Duration::from_secs(1), response.chunk()).await {
            Ok(Ok(Some(chunk))) => read += chunk.len(),
            _ => break,
        }
    }
    if status.is_success() {
        if sub.failing_since.is_some() {
            let _ = app
                .store
                .record_delivery(&sub.org_id, &sub.id, DeliveryRecord::Succeeded)
                .await;
        }
        return Outcome::Delivered;
    }
    if status == StatusCode::GONE {
        let _ = app
            .store
            .record_delivery(&sub.org_id, &sub.id, DeliveryRecord::Gone)
            .await;
        return Outcome::Dropped("the callback answered 410 Gone: subscription blacklisted".into());
    }
    let hint = match status {
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => retry_after,
        _ => None,
    };
    failed(
        app,
        lease,
        &sub,
        format!("status {}", status.as_u16()),
        hint,
    )
    .await
}

async fn failed(
    app: &App,
    lease: &Lease,
    sub: &StoredSubscription,
    reason: String,
    hint: Option<Duration>,
) -> Outcome {
    let record = DeliveryRecord::Failed {
        now: now_ms(),
        blacklist_after_ms: app.config.blacklist_after.as_millis() as i64,
    };
    match app
        .store
        .record_delivery(&sub.org_id, &sub.id, record)
        .await
    {
        Ok(Some(SubscriptionStatus::Blacklisted)) => {
            return Outcome::DeadLetter(format!("{reason}; the subscription is now BLACKLISTED"))
        }
        Ok(None) => return Outcome::Dropped("the subscription was deleted".into()),
        _ => {}
    }
    let schedule = &app.config.retry_schedule;
    let Some(base) = schedule.get(lease.attempt.saturating_sub(1) as usize) else {
        return Outcome::DeadLetter(format!(
            "{reason}; gave up after {} attempts",
            lease.attempt
        ));
    };
    let delay = match hint {
        Some(h) => clamp_to_schedule(h, schedule),
        None => jitter(*base),
    };
    Outcome::Retry { delay, reason }
}

fn retry_soon(app: &App, reason: String) -> Outcome {
    let base = app
        .config
        .retry_schedule
        .first()
        .copied()
        .unwrap_or(Duration::from_secs(5));
    Outcome::Retry {
        delay: jitter(base),
        reason,
    }
}

/// ±20 % jitter, so retries of many notifications do not arrive together.
pub fn jitter(d: Duration) -> Duration {
    let r = u32::from_le_bytes(crate::secret::random_bytes::<4>()) as f64 / u32::MAX as f64;
    d.mul_f64(0.8 + 0.4 * r)
}

fn clamp_to_schedule(d: Duration, schedule: &[Duration]) -> Duration {
    let min = schedule.iter().min().copied().unwrap_or_default();
    let max = schedule.iter().max().copied().unwrap_or(d);
    d.clamp(min, max)
}

/// The longest delay a `Retry-After` can ask for, in either form.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(7 * 86_400);

/// `Retry-After`: delay-seconds or an HTTP date, at most [`MAX_RETRY_AFTER`].
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let delay = at.duration_since(SystemTime::now()).unwrap_or_default();
    Some(delay.min(MAX_RETRY_AFTER))
}

/// Runs delivery for a queue until `shutdown` resolves: leases due jobs in
/// batches and delivers up to `concurrency` at once. `wake` is notified when
/// new jobs are enqueued, so they go out without waiting for the next poll.
pub async fn run_workers(
    app: Arc<App>,
    queue: Arc<dyn DeliveryQueue>,
    concurrency: usize,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(concurrency));
    // When every permit is taken, wait for this many before leasing again.
    let batch = u32::try_from((concurrency / 4).max(1)).unwrap_or(1);
    let wake: Arc<Notify> = app.delivery_wake.clone();
    let visibility = app.config.delivery_timeout * 2 + Duration::from_secs(5);
    tokio::pin!(shutdown);
    loop {
        let free = permits.available_permits().clamp(1, 256);
        let leases = match queue.receive(free, visibility).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the delivery queue");
                Vec::new()
            }
        };
        let idle = leases.is_empty();
        for lease in leases {
            let permit = tokio::select! {
                p = permits.clone().acquire_owned() => p.expect("semaphore is never closed"),
                _ = &mut shutdown => return,
            };
            let (app, queue) = (app.clone(), queue.clone());
            tokio::spawn(async move {
                if let Err(e) = deliver(&app, queue.as_ref(), &lease).await {
                    tracing::error!(error = %e, notification = %lease.job.id, "cannot settle a delivery");
                }
                drop(permit);
            });
        }
        if idle {
            tokio::select! {
                _ = wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = &mut shutdown => return,
            }
        } else if permits.available_permits() == 0 {
            // Saturated: lease the next batch as soon as a share of the
            // deliveries in flight is done, not at the next poll tick.
            tokio::select! {
                done = permits.acquire_many(batch) => drop(done),
                _ = &mut shutdown => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after("120"), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after(" 0 "), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO),
            "a past date means now"
        );
        let future = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
        let d = parse_retry_after(&future).unwrap();
        assert!(d > Duration::from_secs(3500) && d <= Duration::from_secs(3600));
        for bad in ["", "soon", "-5", "1.5", "99999999999999999999999"] {
            assert_eq!(parse_retry_after(bad), None, "{bad}");
        }
        assert_eq!(
            parse_retry_after("999999999999"),
            Some(Duration::from_secs(7 * 86_400))
        );
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        for _ in 0..1000 {
            let d = jitter(Duration::from_secs(10));
            assert!(
                d >= Duration::from_secs(8) && d <= Duration::from_secs(12),
                "{d:?}"
            );
        }
    }

    #[test]
    fn retry_after_is_clamped_to_the_schedule() {
        let schedule = [Duration::from_secs(5), Duration::from_secs(60)];
        assert_eq!(
            clamp_to_schedule(Duration::from_secs(1), &schedule),
            Duration::from_secs(5)
        );
        assert_eq!(
            clamp_to_schedule(Duration::from_secs(3600), &schedule),
            Duration::from_secs(60)
        );
        assert_eq!(
            clamp_to_schedule(Duration::from_secs(30), &schedule),
            Duration::from_secs(30)
        );
    }
}
