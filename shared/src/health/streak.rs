//! A subscription's run of failed attempts, kept in its
//! [`Health`](super::breaker::Health): what makes it `failing` for its
//! organization ([`crate::notice`]) and what ends that.

use serde::{Deserialize, Serialize};

/// A run of failed attempts (any failure: no answer, a 4xx, a 5xx, a
/// refused address), ended by a delivery.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Streak {
    /// Failed attempts in the streak so far (0 when clear).
    pub failures: u32,
    /// When its first failure happened (epoch ms): names the streak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<i64>,
    /// It reached `failing_after` or opened the breaker: the organization
    /// was told (`subscription.failing`), and is told when it recovers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failing: bool,
}

impl Streak {
    /// No failure since the last delivery (the default streak).
    pub fn is_clear(&self) -> bool {
        *self == Streak::default()
    }

    /// After an attempt that `delivered` or not; `opened` when it opened the breaker.
    pub(super) fn after(
        &self,
        delivered: bool,
        opened: bool,
        failing_after: u32,
        now: i64,
    ) -> Streak {
        if delivered {
            return Streak::default();
        }
        let failures = self.failures.saturating_add(1);
        Streak {
            failures,
            since: self.since.or(Some(now)),
            failing: self.failing || opened || failures >= failing_after.max(1),
        }
    }
}
