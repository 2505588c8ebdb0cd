//! The breakers this process has seen open, kept briefly, so that the jobs
//! of a subscription whose breaker is open are deferred without reading the
//! subscription again for each one (on DynamoDB, a read unit per job).
//! Trusted for [`TRUST`] at most: a breaker closed elsewhere (another
//! instance's probe, a re-posted subscription) is seen within that time.

use std::collections::HashMap;
use std::sync::Mutex;

use super::breaker::Health;
use crate::ids::SubscriptionId;

/// How long a remembered state is trusted, ms.
pub const TRUST: i64 = 5_000;

/// Past this many remembered breakers, the stale ones are forgotten.
const MAX_ENTRIES: usize = 10_000;

/// The breakers seen open lately in this process, with when each was seen, and the unparks under way.
#[derive(Debug, Default)]
pub struct HealthCache {
    entries: Mutex<HashMap<SubscriptionId, (Health, i64)>>,
    /// Subscriptions whose parked jobs this process is putting back, and
    /// whether another delivery asked for it meanwhile (then it goes again).
    unparking: Mutex<HashMap<SubscriptionId, bool>>,
}

/// Held while this process puts a subscription's parked jobs back: one at
/// a time, however many deliveries see the mark.
pub struct Unparking<'a> {
    cache: &'a HealthCache,
    subscription: SubscriptionId,
}

impl Unparking<'_> {
    /// Whether another delivery asked for an unpark since the last call.
    pub fn again(&self) -> bool {
        let mut running = self
            .cache
            .unparking
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        running
            .get_mut(&self.subscription)
            .map(std::mem::take)
            .unwrap_or(false)
    }
}

impl Drop for Unparking<'_> {
    fn drop(&mut self) {
        let mut set = self
            .cache
            .unparking
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        set.remove(&self.subscription);
    }
}

impl HealthCache {
    /// Breakers open or half-open among those remembered: every breaker of
    /// a single process (`webhooks-local`), which writes each change here.
    pub fn open_count(&self, now: i64) -> usize {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .values()
            .filter(|(health, _)| health.state(now) != super::breaker::BreakerState::Closed)
            .count()
    }

    /// Remembers the state read or written at `now`; a clear one (and not
    /// paused) is forgotten (only unhealthy subscriptions take memory).
    pub fn remember(&self, subscription: &SubscriptionId, health: &Health, now: i64) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if health.is_clear() && health.paused(now).is_none() {
            entries.remove(subscription);
            return;
        }
        if let Some((known, _)) = entries.get(subscription) {
            if known.rev > health.rev {
                return; // an older read must not replace a newer write
            }
        }
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, (_, at)| now - *at < TRUST);
        }
        entries.insert(subscription.clone(), (health.clone(), now));
    }

    /// `None` when this process is already putting them back: that one
    /// then goes again ([`Unparking::again`]), so a job parked meanwhile
    /// is not left behind.
    pub fn begin_unpark(&self, subscription: &SubscriptionId) -> Option<Unparking<'_>> {
        let mut running = self.unparking.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(again) = running.get_mut(subscription) {
            *again = true;
            return None;
        }
        running.insert(subscription.clone(), false);
        Some(Unparking {
            cache: self,
            subscription: subscription.clone(),
        })
    }

    /// The state remembered less than [`TRUST`] ago, if any.
    pub fn fresh(&self, subscription: &SubscriptionId, now: i64) -> Option<Health> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (health, at) = entries.get(subscription)?;
        (now - at < TRUST).then(|| health.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::CallFailure;
    use crate::health::breaker::{BreakerRule, Signal};

    const T0: i64 = 1_800_000_000_000;

    fn open() -> Health {
        let rule = BreakerRule {
            failures: 1,
            ..BreakerRule::default()
        };
        Health::default()
            .after(&Signal::Outage(CallFailure::Timeout.into()), &rule, T0)
            .unwrap()
    }

    #[test]
    fn an_open_breaker_is_trusted_briefly_and_a_clear_one_is_forgotten() {
        let cache = HealthCache::default();
        let a: SubscriptionId = "a".into();
        cache.remember(&a, &open(), T0);
        let wait = |at: i64| {
            cache
                .fresh(&a, at)
                .and_then(|h| h.wait_until(at, 0.0, false))
        };
        assert_eq!(wait(T0 + 1), Some(T0 + 30_000));
        assert_eq!(wait(T0 + TRUST), None);
        assert_eq!(cache.open_count(T0 + 1), 1);
        cache.remember(&a, &Health::default(), T0 + 2);
        assert_eq!(cache.fresh(&a, T0 + 3), None);
        assert_eq!(cache.open_count(T0 + 3), 0);
    }

    #[test]
    fn an_older_read_does_not_replace_a_newer_write() {
        let cache = HealthCache::default();
        let a: SubscriptionId = "a".into();
        let newer = open();
        let older = Health {
            rev: 0,
            failures: 1,
            ..Health::default()
        };
        cache.remember(&a, &newer, T0);
        cache.remember(&a, &older, T0 + 1);
        assert_eq!(cache.fresh(&a, T0 + 2), Some(newer));
    }
}
