//! Step 6 of [`deliver`](super): what happens to a notification, a pure
//! function of what the steps found, the attempt number, the time and the
//! retry schedule (the subscription's own, or the deployment's). Every
//! runtime's fate of a notification is decided here and nowhere else.

use std::time::Duration;

use super::found::{AfterFailure, Attempt, Found, Verdict};
use super::reason::Reason;
use super::run::Run;
use crate::clock::millis;

/// Step 6: the verdict on what the steps found. A job held before its
/// attempt keeps the verdict it was held with; one its breaker holds is to
/// be parked ([`parking`](super::parking) says how); the service's own
/// fault defers it by the retry schedule's first delay, spread by up to
/// +20 % as retries are, so a fixed fault is not met by every deferred job
/// at once. An attempt on a subscription read before it follows that
/// subscription's own schedule, when it has one; the service's own faults
/// and unread subscriptions, the deployment's.
pub fn verdict(run: &Run<'_>, found: &Found) -> Verdict {
    let schedule = &run.app.config.retry_schedule;
    match found {
        Found::Held(held) => held.clone(),
        Found::BreakerOpen { at, .. } => Verdict::Park {
            at: *at,
            reason: Reason::BreakerOpen,
        },
        Found::Superseded => Verdict::Drop(Reason::Superseded),
        Found::ServiceFault(fault) => {
            let first = schedule.first().copied();
            let delay = first.unwrap_or(Duration::from_secs(5)).as_millis() as f64;
            Verdict::Defer {
                at: run.now + (delay * (1.0 + 0.2 * run.random)) as i64,
                reason: Reason::ServiceFault(fault.clone()),
            }
        }
        Found::Attempted(attempted) => decide(
            &attempted.attempt,
            run.lease.attempt,
            run.now,
            match &attempted.sent {
                Some((subscription, _)) => subscription.retry_waits(schedule),
                None => schedule,
            },
            run.random,
        ),
    }
}

/// The retry delay when the store could not be read and the schedule is empty.
const STORE_RETRY: Duration = Duration::from_secs(5);

/// Decides the fate of attempt number `number` (1 for the first) made at
/// `now`. `schedule[n - 1]` is the delay after failed attempt `n`; past its
/// end the notification is dead. `random` in `[0, 1]` spreads the delays by
/// ±20 % so that retries of many notifications do not arrive together.
pub fn decide(
    attempt: &Attempt,
    number: u32,
    now: i64,
    schedule: &[Duration],
    random: f64,
) -> Verdict {
    match attempt {
        Attempt::Succeeded => Verdict::Delivered,
        Attempt::Unwanted(reason) => Verdict::Drop(reason.clone()),
        Attempt::Unsendable(reason) => Verdict::Dead(reason.clone()),
        Attempt::Gone => Verdict::Drop(Reason::Gone),
        Attempt::StoreUnavailable(reason) => {
            let base = schedule.first().copied().unwrap_or(STORE_RETRY);
            Verdict::Retry {
                at: now + millis(jitter(base, random)),
                reason: reason.clone(),
            }
        }
        Attempt::Failed {
            failure,
            retry_after,
            subscription,
        } => match subscription {
            AfterFailure::Blacklisted => Verdict::Blacklist(Reason::Blacklisted(*failure)),
            AfterFailure::Deleted => Verdict::Drop(Reason::Deleted),
            AfterFailure::Deliverable => {
                let Some(base) = schedule.get(number.saturating_sub(1) as usize) else {
                    return Verdict::Dead(Reason::GaveUp {
                        failure: *failure,
                        attempts: number,
                    });
                };
                let delay = match retry_after
                    .as_deref()
                    .and_then(|v| parse_retry_after(v, now))
                {
                    Some(asked) => clamp_to_schedule(asked, schedule),
                    None => jitter(*base, random),
                };
                Verdict::Retry {
                    at: now + millis(delay),
                    reason: Reason::Failed(*failure),
                }
            }
        },
    }
}

/// The pause a receiver asked of its whole subscription: a `429` or `503`
/// whose `Retry-After` parses, until then (epoch ms), at most the retry
/// schedule's longest wait (shorter than its first is kept: it is what the
/// receiver asked; the job that got the answer retries on the schedule).
pub fn pause_until(
    status: u16,
    retry_after: Option<&str>,
    now: i64,
    schedule: &[Duration],
) -> Option<i64> {
    if !matches!(status, 429 | 503) {
        return None;
    }
    let asked = parse_retry_after(retry_after?, now)?;
    let longest = schedule.iter().max().copied().unwrap_or(asked);
    Some(now + millis(asked.min(longest)))
}

/// `d` spread by ±20 %: `random` 0 gives 80 %, 1 gives 120 %.
pub fn jitter(d: Duration, random: f64) -> Duration {
    d.mul_f64(0.8 + 0.4 * random.clamp(0.0, 1.0))
}

fn clamp_to_schedule(d: Duration, schedule: &[Duration]) -> Duration {
    let min = schedule.iter().min().copied().unwrap_or_default();
    let max = schedule.iter().max().copied().unwrap_or(d);
    d.clamp(min, max)
}

/// The longest delay a `Retry-After` can ask for, in either form.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(7 * 86_400);

/// `Retry-After` at `now` (epoch ms): delay-seconds or an HTTP date, at most
/// [`MAX_RETRY_AFTER`]; a past date means now.
pub fn parse_retry_after(value: &str, now: i64) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let at_ms = at
        .duration_since(std::time::UNIX_EPOCH)
        .map(millis)
        .unwrap_or(0);
    let delay = Duration::from_millis(u64::try_from(at_ms - now).unwrap_or(0));
    Some(delay.min(MAX_RETRY_AFTER))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::Failure;
    use crate::model::SubscriptionStatus;

    const NOW: i64 = 1_700_000_000_000;
    const S: i64 = 1000;

    fn schedule() -> Vec<Duration> {
        [5, 60, 300].map(Duration::from_secs).to_vec()
    }

    fn failed(retry_after: Option<&str>, subscription: AfterFailure) -> Attempt {
        Attempt::Failed {
            failure: Failure::Status(500),
            retry_after: retry_after.map(str::to_owned),
            subscription,
        }
    }

    fn retry(at: i64, reason: Reason) -> Verdict {
        Verdict::Retry { at, reason }
    }

    /// What `failed` failed with.
    fn status_500() -> Reason {
        Reason::Failed(Failure::Status(500))
    }

    fn gave_up(attempts: u32) -> Verdict {
        Verdict::Dead(Reason::GaveUp {
            failure: Failure::Status(500),
            attempts,
        })
    }

    /// The whole decision, one row per case: attempt, attempt number,
    /// random draw, expected verdict.
    #[test]
    fn decision_table() {
        use AfterFailure::*;
        let rows: Vec<(Attempt, u32, f64, Verdict)> = vec![
            (Attempt::Succeeded, 1, 0.5, Verdict::Delivered),
            (Attempt::Succeeded, 4, 0.5, Verdict::Delivered),
            (
                Attempt::Unwanted(Reason::NotActive(SubscriptionStatus::Expired)),
                1,
                0.5,
                Verdict::Drop(Reason::NotActive(SubscriptionStatus::Expired)),
            ),
            (
                Attempt::Unsendable(Reason::SecretUnusable),
                1,
                0.5,
                Verdict::Dead(Reason::SecretUnusable),
            ),
            (Attempt::Gone, 2, 0.5, Verdict::Drop(Reason::Gone)),
            // Store down: the first delay of the schedule, jittered.
            (
                Attempt::StoreUnavailable(Reason::StoreUnavailable("down".into())),
                7,
                0.5,
                retry(NOW + 5 * S, Reason::StoreUnavailable("down".into())),
            ),
            // Failures walk the schedule, with ±20 % jitter.
            (
                failed(None, Deliverable),
                1,
                0.5,
                retry(NOW + 5 * S, status_500()),
            ),
            (
                failed(None, Deliverable),
                1,
                0.0,
                retry(NOW + 4 * S, status_500()),
            ),
            (
                failed(None, Deliverable),
                1,
                1.0,
                retry(NOW + 6 * S, status_500()),
            ),
            (
                failed(None, Deliverable),
                2,
                0.5,
                retry(NOW + 60 * S, status_500()),
            ),
            (
                failed(None, Deliverable),
                3,
                0.5,
                retry(NOW + 300 * S, status_500()),
            ),
            // Past the schedule: dead.
            (failed(None, Deliverable), 4, 0.5, gave_up(4)),
            // Retry-After is honoured within the schedule's bounds, not jittered.
            (
                failed(Some("30"), Deliverable),
                1,
                0.0,
                retry(NOW + 30 * S, status_500()),
            ),
            (
                failed(Some("1"), Deliverable),
                2,
                0.0,
                retry(NOW + 5 * S, status_500()),
            ),
            (
                failed(Some("86400"), Deliverable),
                1,
                0.0,
                retry(NOW + 300 * S, status_500()),
            ),
            (
                failed(Some("soon"), Deliverable),
                2,
                0.5,
                retry(NOW + 60 * S, status_500()),
            ),
            // ... but never past the end of the schedule.
            (failed(Some("30"), Deliverable), 4, 0.5, gave_up(4)),
            // The failure blacklisted the subscription, or it was deleted.
            (
                failed(None, Blacklisted),
                1,
                0.5,
                Verdict::Blacklist(Reason::Blacklisted(Failure::Status(500))),
            ),
            (
                failed(None, Deleted),
                1,
                0.5,
                Verdict::Drop(Reason::Deleted),
            ),
        ];
        for (attempt, number, random, expected) in rows {
            assert_eq!(
                decide(&attempt, number, NOW, &schedule(), random),
                expected,
                "{attempt:?}, attempt {number}, random {random}"
            );
        }
    }

    #[test]
    fn an_empty_schedule_gives_up_at_once_and_store_failures_wait_five_seconds() {
        assert_eq!(
            decide(&failed(None, AfterFailure::Deliverable), 1, NOW, &[], 0.5),
            gave_up(1)
        );
        assert_eq!(
            decide(
                &Attempt::StoreUnavailable(Reason::StoreUnavailable("x".into())),
                1,
                NOW,
                &[],
                0.5
            ),
            retry(NOW + 5 * S, Reason::StoreUnavailable("x".into()))
        );
    }

    /// A `429` or `503` with a `Retry-After` pauses the subscription for
    /// what it asks, at most the schedule's longest wait; other answers,
    /// or none that parses, do not.
    #[test]
    fn a_pause_is_what_the_receiver_asked_within_the_longest_wait() {
        let schedule = schedule();
        let longest = millis(*schedule.iter().max().unwrap());
        assert_eq!(
            pause_until(429, Some("2"), NOW, &schedule),
            Some(NOW + 2 * S)
        );
        assert_eq!(pause_until(503, Some("0"), NOW, &schedule), Some(NOW));
        assert_eq!(
            pause_until(429, Some("999999"), NOW, &schedule),
            Some(NOW + longest)
        );
        assert_eq!(pause_until(500, Some("2"), NOW, &schedule), None);
        assert_eq!(pause_until(429, None, NOW, &schedule), None);
        assert_eq!(pause_until(429, Some("soon"), NOW, &schedule), None);
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(
            parse_retry_after("120", NOW),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after(" 0 ", NOW), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", NOW),
            Some(Duration::ZERO),
            "a past date means now"
        );
        // 2023-11-14T22:13:20Z is NOW; one hour later:
        assert_eq!(
            parse_retry_after("Tue, 14 Nov 2023 23:13:20 GMT", NOW),
            Some(Duration::from_secs(3600))
        );
        for bad in ["", "soon", "-5", "1.5", "99999999999999999999999"] {
            assert_eq!(parse_retry_after(bad, NOW), None, "{bad}");
        }
        assert_eq!(
            parse_retry_after("999999999999", NOW),
            Some(MAX_RETRY_AFTER)
        );
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        let d = Duration::from_secs(10);
        assert_eq!(jitter(d, 0.0), Duration::from_secs(8));
        assert_eq!(jitter(d, 1.0), Duration::from_secs(12));
        assert_eq!(jitter(d, 7.0), Duration::from_secs(12), "clamped");
    }
}
