//! Why a notification was not delivered, or not attempted: one typed reason
//! for what an attempt found ([`Attempt`](super::Attempt)) and the verdict
//! that follows ([`Verdict`](super::Verdict)). A failed call's part is a
//! [`Failure`], the same type the subscription's health keeps. Shown as the
//! text logs and dead letters have always carried.

use std::fmt;

use crate::destinations::ServiceFault;
use crate::failure::Failure;
use crate::model::SubscriptionStatus;

/// Why a job was not delivered, or not attempted now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// The attempt failed: the callback's status or the step that failed.
    Failed(Failure),
    /// The attempt failed and the retry schedule is over: after `attempts`.
    GaveUp {
        /// Why the last attempt failed.
        failure: Failure,
        /// Attempts made.
        attempts: u32,
    },
    /// The attempt failed and blacklisted the subscription (its failure
    /// streak outlasted `WEBHOOKS_BLACKLIST_AFTER`).
    Blacklisted(Failure),
    /// The callback answered `410 Gone`: the subscription is blacklisted.
    Gone,
    /// Not sent: the subscription was deleted.
    Deleted,
    /// Not sent: the subscription is not ACTIVE (it is this).
    NotActive(SubscriptionStatus),
    /// Not sent: the subscription has expired.
    Expired,
    /// Never sendable: the subscription's signing secret cannot be decoded.
    SecretUnusable,
    /// Never sendable: the callback uri is invalid (why).
    InvalidUri(String),
    /// Not sent: the subscription could not be read (the store's error).
    StoreUnavailable(String),
    /// Not attempted: a resend delivered it meanwhile.
    Superseded,
    /// Not attempted: it is not due yet.
    NotDue,
    /// Not attempted: the subscription has this many calls in flight, its cap.
    AtCap(usize),
    /// Not attempted: the subscription's circuit breaker is open.
    BreakerOpen,
    /// Not attempted, the breaker open: kept in the queue as the job that
    /// probes when the cool-down ends.
    KeptToProbe,
    /// Not attempted: the receiver asked for a pause (a `429` or `503` with
    /// `Retry-After`), which holds every job of the subscription.
    Paused,
    /// Not attempted: the subscription's rate limit (`rateLimit`, this
    /// many a second) has no slot for it within the horizon.
    RateLimited(u32),
    /// Not attempted as the customer's: the service's own fault reaching an
    /// AWS destination (its credentials, its external-id prefix).
    ServiceFault(ServiceFault),
    /// Not attempted: it would have started this many ms after its rate
    /// slot, later than the rule allows.
    SlotMissed(i64),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Failed(failure) => write!(f, "{failure}"),
            Reason::GaveUp { failure, attempts } => {
                write!(f, "{failure}; gave up after {attempts} attempts")
            }
            Reason::Blacklisted(failure) => {
                write!(f, "{failure}; the subscription is now BLACKLISTED")
            }
            Reason::Gone => f.write_str("the callback answered 410 Gone: subscription blacklisted"),
            Reason::Deleted => f.write_str("the subscription was deleted"),
            Reason::NotActive(status) => write!(f, "the subscription is {}", status.as_str()),
            Reason::Expired => f.write_str("the subscription has expired"),
            Reason::SecretUnusable => f.write_str("the subscription's signing secret is unusable"),
            Reason::InvalidUri(why) => write!(f, "the callback uri is invalid: {why}"),
            Reason::StoreUnavailable(error) => write!(f, "store unavailable: {error}"),
            Reason::Superseded => f.write_str("delivered meanwhile (a resend)"),
            Reason::NotDue => f.write_str("not due yet"),
            Reason::AtCap(cap) => write!(
                f,
                "{cap} calls in flight to this subscription (WEBHOOKS_MAX_IN_FLIGHT_PER_SUBSCRIPTION)"
            ),
            Reason::BreakerOpen => f.write_str("the subscription's circuit breaker is open"),
            Reason::KeptToProbe => f.write_str(
                "the subscription's circuit breaker is open; kept in the queue to probe",
            ),
            Reason::Paused => {
                f.write_str("the receiver asked for a pause (429 or 503 with Retry-After)")
            }
            Reason::RateLimited(limit) => {
                write!(f, "the subscription's rate limit ({limit} a second) is reached")
            }
            Reason::ServiceFault(fault) => write!(f, "the service's own fault: {fault}"),
            Reason::SlotMissed(late) => {
                write!(f, "{late} ms past its rate-limit slot: takes another")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::CallFailure;

    /// The texts logs and dead letters carry, each as it always read.
    #[test]
    fn every_reason_reads_as_it_always_did() {
        let connect = Failure::Call(CallFailure::ConnectFailed);
        let rows = [
            (Reason::Failed(Failure::Status(307)), "status 307"),
            (Reason::Failed(connect), "CONNECT_FAILED"),
            (
                Reason::GaveUp {
                    failure: Failure::Status(500),
                    attempts: 4,
                },
                "status 500; gave up after 4 attempts",
            ),
            (
                Reason::Blacklisted(connect),
                "CONNECT_FAILED; the subscription is now BLACKLISTED",
            ),
            (
                Reason::Gone,
                "the callback answered 410 Gone: subscription blacklisted",
            ),
            (Reason::Deleted, "the subscription was deleted"),
            (
                Reason::NotActive(SubscriptionStatus::Blacklisted),
                "the subscription is BLACKLISTED",
            ),
            (Reason::Expired, "the subscription has expired"),
            (
                Reason::SecretUnusable,
                "the subscription's signing secret is unusable",
            ),
            (
                Reason::InvalidUri("no host".into()),
                "the callback uri is invalid: no host",
            ),
            (
                Reason::StoreUnavailable("timed out".into()),
                "store unavailable: timed out",
            ),
            (Reason::Superseded, "delivered meanwhile (a resend)"),
            (Reason::NotDue, "not due yet"),
            (
                Reason::AtCap(4),
                "4 calls in flight to this subscription (WEBHOOKS_MAX_IN_FLIGHT_PER_SUBSCRIPTION)",
            ),
            (
                Reason::BreakerOpen,
                "the subscription's circuit breaker is open",
            ),
            (
                Reason::KeptToProbe,
                "the subscription's circuit breaker is open; kept in the queue to probe",
            ),
            (
                Reason::Paused,
                "the receiver asked for a pause (429 or 503 with Retry-After)",
            ),
            (
                Reason::RateLimited(50),
                "the subscription's rate limit (50 a second) is reached",
            ),
            (
                Reason::SlotMissed(31),
                "31 ms past its rate-limit slot: takes another",
            ),
        ];
        for (reason, text) in rows {
            assert_eq!(reason.to_string(), text);
        }
    }
}
