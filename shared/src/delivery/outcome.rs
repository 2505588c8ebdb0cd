//! What the delivery history records of an attempt: the attempt itself (from
//! what the POST produced) and the notification's new state (from the
//! verdict). Pure functions; `deliver` writes their result.

use std::time::Duration;

use super::{Attempt, Verdict};
use crate::callback::post::Posted;
use crate::history::{AttemptRecord, NotificationStatus, Outcome, Trigger};
use crate::queue::Lease;

/// Code of a notification that was not sent because its subscription was
/// deleted, is not ACTIVE or expired.
pub const NOT_ACTIVE: &str = "SUBSCRIPTION_NOT_ACTIVE";
/// Code of a notification that can never be sent (unusable secret or uri).
pub const UNSENDABLE: &str = "UNSENDABLE";

/// MANUAL for the first attempt of a resend or recover, SCHEDULED otherwise.
pub fn trigger(lease: &Lease) -> Trigger {
    if lease.attempt <= 1 {
        lease.job.trigger
    } else {
        Trigger::Scheduled
    }
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

/// The history's record of a delivery: None when nothing is known (the
/// store could not be read, so nothing was attempted).
pub fn of(attempt: &Attempt, made: Option<AttemptRecord>, verdict: &Verdict) -> Option<Outcome> {
    if matches!(attempt, Attempt::StoreUnavailable(_)) {
        return None;
    }
    let (status, next_attempt_at) = match verdict {
        Verdict::Delivered => (NotificationStatus::Delivered, None),
        Verdict::Retry { at, .. } => (NotificationStatus::Pending, Some(*at)),
        Verdict::Defer { .. } | Verdict::Park { .. } => return None,
        Verdict::Dead(_) | Verdict::Blacklist(_) | Verdict::Drop(_) => {
            (NotificationStatus::Failed, None)
        }
    };
    let code = match (attempt, &made) {
        (_, Some(_)) => None,
        (Attempt::Unsendable(_), None) => Some(UNSENDABLE.to_owned()),
        (_, None) => Some(NOT_ACTIVE.to_owned()),
    };
    Some(Outcome {
        status,
        next_attempt_at,
        attempt: made,
        code,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::Reason;
    use crate::failure::{CallFailure, Failure};
    use crate::model::SubscriptionStatus;

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

    #[test]
    fn verdicts_become_states() {
        let made = || Some(attempt_record(&answered(500, ""), Trigger::Scheduled, 1));
        let failed = Attempt::Failed {
            failure: Failure::Status(500),
            retry_after: None,
            subscription: super::super::AfterFailure::Deliverable,
        };
        let retry = of(
            &failed,
            made(),
            &Verdict::Retry {
                at: 9,
                reason: Reason::Failed(Failure::Status(500)),
            },
        )
        .unwrap();
        assert_eq!(
            (retry.status, retry.next_attempt_at),
            (NotificationStatus::Pending, Some(9))
        );
        let gave_up = Reason::GaveUp {
            failure: Failure::Status(500),
            attempts: 4,
        };
        let dead = of(&failed, made(), &Verdict::Dead(gave_up)).unwrap();
        assert_eq!((dead.status, dead.code), (NotificationStatus::Failed, None));
        let blacklisted = Reason::NotActive(SubscriptionStatus::Blacklisted);
        let unwanted = Attempt::Unwanted(blacklisted.clone());
        let dropped = of(&unwanted, None, &Verdict::Drop(blacklisted)).unwrap();
        assert_eq!(dropped.status, NotificationStatus::Failed);
        assert_eq!(dropped.code.as_deref(), Some(NOT_ACTIVE));
        assert!(dropped.attempt.is_none());
        let gone = of(&Attempt::Gone, made(), &Verdict::Drop(Reason::Gone)).unwrap();
        assert_eq!(gone.status, NotificationStatus::Failed);
        assert_eq!(
            of(
                &Attempt::StoreUnavailable(Reason::StoreUnavailable("x".into())),
                None,
                &Verdict::Retry {
                    at: 1,
                    reason: Reason::StoreUnavailable("x".into())
                }
            ),
            None
        );
        assert_eq!(
            of(&Attempt::Succeeded, made(), &Verdict::Delivered)
                .unwrap()
                .status,
            NotificationStatus::Delivered
        );
    }
}
