//! What the steps of [`deliver`](super) find, threaded by it from one step
//! to the next ([`Found`]), and what is made of it: the notification's fate
//! ([`Verdict`]). Every step reads these; none is a step's own.

use super::reason::Reason;
use crate::callback::CallbackTarget;
use crate::destinations::{Destination, ServiceFault};
use crate::failure::{CallFailure, Failure};
use crate::health::Health;
use crate::history::AttemptRecord;
use crate::signature::SigningKey;
use crate::store::StoredSubscription;

/// What the steps found, from the first that stops the job to the one
/// settle at the end ([`settle`](super::settle)).
pub enum Found {
    /// Not attempted, and settled with this verdict at once (not due, paused,
    /// over its cap or rate limit, its breaker's probe in flight): nothing
    /// recorded, no attempt counted.
    Held(Verdict),
    /// Not attempted: its breaker is open until `at` (epoch ms), as this
    /// process remembers it or as stored. [`parking`](super::parking) keeps
    /// it to probe or parks it.
    BreakerOpen {
        /// The breaker's health it was held by.
        health: Box<Health>,
        /// When the breaker lets it try.
        at: i64,
    },
    /// A scheduled retry that the history shows done with: dropped, not counted.
    Superseded,
    /// The service's own fault reaching an AWS destination (its credentials,
    /// its external-id prefix): no attempt, nothing recorded on the
    /// subscription.
    ServiceFault(ServiceFault),
    /// Attempted, or not sent for a reason the attempt stands for.
    Attempted(Box<Attempted>),
}

/// A notification ready to be sent ([`prepare`](super::prepare)'s).
pub struct Ready {
    /// The subscription the notification goes to, as stored.
    pub subscription: StoredSubscription,
    /// The current secret's key first, then those of the replaced secrets
    /// still in their grace period: the notification is signed with each.
    pub keys: Vec<SigningKey>,
    /// Where it goes: the checked callback or destination, or why it
    /// cannot go there (a failed attempt).
    pub target: Result<Target, CallFailure>,
}

/// Where a notification is sent.
pub enum Target {
    /// POSTed to an HTTPS callback.
    Callback(CallbackTarget),
    /// Sent into an AWS destination (docs/decisions/destinations.md).
    Destination(Destination),
}

/// What an attempt left: what it found ([`decide`](super::decide::decide)'s
/// input), the history's record of its POST, and, when it was sent, the
/// subscription and the health change its organization may be told of.
pub struct Attempted {
    /// What the attempt found.
    pub attempt: Attempt,
    /// The record of the POST; none when nothing was sent.
    pub made: Option<AttemptRecord>,
    /// The subscription as read before the attempt, and the health change
    /// the attempt wrote, `(before, after)`; none when nothing was sent.
    pub sent: Option<(StoredSubscription, Option<(Health, Health)>)>,
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
}

/// A breaker seen closed with jobs parked: its health then, and when
/// (epoch ms). The settle puts the parked jobs back.
pub type Closed = (Health, i64);

/// What one attempt found: everything [`decide`](super::decide::decide) needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// Not sent: the subscription was deleted, is not ACTIVE, or expired.
    Unwanted(Reason),
    /// Not sent, and it never can be: unusable secret or callback uri.
    Unsendable(Reason),
    /// The subscription could not be read; nothing was sent.
    StoreUnavailable(Reason),
    /// The callback answered 2xx.
    Succeeded,
    /// The callback answered `410 Gone`; the subscription is now BLACKLISTED.
    Gone,
    /// No answer, a forbidden address or a status other than 2xx and 410.
    Failed {
        /// The failing step (`CONNECT_FAILED`, ...) or the status.
        failure: Failure,
        /// The `Retry-After` of a 429 or 503 answer.
        retry_after: Option<String>,
        /// The subscription after the failure was recorded on it.
        subscription: AfterFailure,
    },
}

/// A subscription's state once a failed attempt is recorded on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// Still deliverable (or unknown: the store did not answer).
    Deliverable,
    /// Its failure streak outlasted `WEBHOOKS_BLACKLIST_AFTER`: BLACKLISTED now.
    Blacklisted,
    /// Deleted meanwhile.
    Deleted,
}

/// The notification's fate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Sent and acknowledged: remove it from the queue.
    Delivered,
    /// Failed: attempt it again at `at` (epoch ms).
    Retry {
        /// When it is due again (epoch ms).
        at: i64,
        /// Why it failed, for logs.
        reason: Reason,
    },
    /// Given up (schedule exhausted, or unsendable): keep it as a dead letter.
    Dead(Reason),
    /// Its subscription was blacklisted by this failure: keep it as a dead letter.
    Blacklist(Reason),
    /// Not sent and never will be (subscription deleted, inactive, expired,
    /// or the callback answered 410): remove it.
    Drop(Reason),
    /// Not attempted: its subscription's calls are at their cap, its
    /// breaker is open, or it is not due yet. Due again at `at` (epoch ms),
    /// with no attempt counted and nothing recorded.
    Defer {
        /// When it is due again (epoch ms).
        at: i64,
        /// Why it was not attempted, for logs.
        reason: Reason,
    },
    /// Not attempted, its subscription's breaker open: parked until the
    /// breaker closes (or, where parking is a deferral, due again at `at`).
    Park {
        /// When it is due again where parking is a deferral (epoch ms).
        at: i64,
        /// Why it was parked, for logs.
        reason: Reason,
    },
}

impl Verdict {
    /// The reason, for logs; none for a delivery.
    pub fn reason(&self) -> Option<&Reason> {
        match self {
            Verdict::Delivered => None,
            Verdict::Retry { reason, .. }
            | Verdict::Defer { reason, .. }
            | Verdict::Park { reason, .. }
            | Verdict::Dead(reason)
            | Verdict::Blacklist(reason)
            | Verdict::Drop(reason) => Some(reason),
        }
    }

    /// The verdict's name as metrics label it (`outcome`): its variant,
    /// lowercase. No wildcard: a new verdict is a new arm here.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Delivered => "delivered",
            Verdict::Retry { .. } => "retry",
            Verdict::Dead(_) => "dead",
            Verdict::Blacklist(_) => "blacklist",
            Verdict::Drop(_) => "drop",
            Verdict::Defer { .. } => "deferred",
            Verdict::Park { .. } => "parked",
        }
    }
}
