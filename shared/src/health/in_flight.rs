//! Calls in flight per subscription, in this process: a callback can hold
//! at most `WEBHOOKS_MAX_IN_FLIGHT_PER_SUBSCRIPTION` of the delivery slots,
//! so one that hangs cannot take the ones every other tenant needs. A job
//! over the cap is deferred, not attempted and not counted as a failure.
//!
//! Per process (per Lambda instance on AWS): a cap shared by every instance
//! would cost a write per delivery; there the breaker and SQS fair queues
//! do the rest (docs/decisions/tenant-isolation.md).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::ids::SubscriptionId;

/// Counts each subscription's calls in flight in this process, up to `cap`.
#[derive(Debug)]
pub struct InFlight {
    cap: usize,
    calls: Arc<Mutex<HashMap<SubscriptionId, usize>>>,
}

/// A slot of a subscription's cap, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    subscription: SubscriptionId,
    calls: Arc<Mutex<HashMap<SubscriptionId, usize>>>,
}

impl InFlight {
    /// A counter allowing `cap` calls per subscription (at least 1).
    pub fn new(cap: usize) -> Self {
        InFlight {
            cap: cap.max(1),
            calls: Arc::default(),
        }
    }

    /// The most calls in flight one subscription may have (`WEBHOOKS_MAX_IN_FLIGHT_PER_SUBSCRIPTION`).
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// A slot, or `None` when the subscription already has `cap` calls in flight.
    pub fn try_acquire(&self, subscription: &SubscriptionId) -> Option<Slot> {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        let n = calls.entry(subscription.clone()).or_default();
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(Slot {
            subscription: subscription.clone(),
            calls: self.calls.clone(),
        })
    }

    /// Calls in flight for `subscription` now.
    pub fn count(&self, subscription: &SubscriptionId) -> usize {
        let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        calls.get(subscription).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = calls.get_mut(&self.subscription) {
            *n -= 1;
            if *n == 0 {
                // Only subscriptions with calls in flight take memory.
                calls.remove(&self.subscription);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_holds_at_most_its_cap_and_others_are_not_affected() {
        let limits = InFlight::new(2);
        let (a, b): (SubscriptionId, SubscriptionId) = ("a".into(), "b".into());
        let first = limits.try_acquire(&a).unwrap();
        let _second = limits.try_acquire(&a).unwrap();
        assert!(limits.try_acquire(&a).is_none());
        assert!(limits.try_acquire(&b).is_some());
        drop(first);
        assert_eq!(limits.count(&a), 1);
        assert!(limits.try_acquire(&a).is_some());
    }

    #[test]
    fn released_slots_leave_nothing_behind() {
        let limits = InFlight::new(1);
        let a: SubscriptionId = "a".into();
        drop(limits.try_acquire(&a));
        assert!(limits.calls.lock().unwrap().is_empty());
    }
}
