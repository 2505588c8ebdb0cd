//! A circuit breaker per subscription: after a run of failed attempts that
//! look like an outage (no answer, or a 5xx) the breaker opens, and that
//! subscription's jobs are deferred without calling the callback; after a
//! cool-down one probe goes out (half-open); a success closes it, a failed
//! probe opens it again for twice as long (up to a maximum).
//!
//! The state is stored with the subscription ([`Health`]), so every worker
//! and Lambda instance shares it, and read with it (no extra read per
//! notification); writes are compare-and-set on `rev`
//! ([`Store::update_health`](crate::store::Store::update_health)). This
//! module holds the rule, as pure functions of the state and the time.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::millis;

pub use super::streak::Streak;

/// The breaker's settings (`WEBHOOKS_BREAKER_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerRule {
    /// Consecutive outage-like failures that open it.
    pub failures: u32,
    /// A failure more than this after the previous one starts a new run.
    pub window: Duration,
    /// How long it stays open the first time.
    pub cooldown: Duration,
    /// The longest cool-down (each failed probe doubles it up to this).
    pub max_cooldown: Duration,
    /// Consecutive failed attempts of any kind after which the subscription
    /// is failing (`WEBHOOKS_FAILING_AFTER`): its organization is told once
    /// per streak ([`crate::notice`]), as it is when the breaker opens.
    pub failing_after: u32,
}

impl Default for BreakerRule {
    fn default() -> Self {
        BreakerRule {
            failures: 5,
            window: Duration::from_secs(60),
            cooldown: Duration::from_secs(30),
            max_cooldown: Duration::from_secs(600),
            failing_after: 4,
        }
    }
}

/// A subscription's delivery health: its breaker and what it counted. The
/// default is a closed breaker with nothing counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// Bumped by every write: the compare-and-set token.
    #[serde(default)]
    pub rev: u64,
    /// Consecutive outage-like failures (reset by an answer that is not one).
    #[serde(default)]
    pub failures: u32,
    /// When the last counted failure happened (epoch ms); absent before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure_at: Option<i64>,
    /// The failing step (`TIMEOUT`, ...) or `status <n>` of the last failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
    /// When it opened (epoch ms); `None` while closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened_at: Option<i64>,
    /// Until when it is open; from then on it is half-open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_until: Option<i64>,
    /// The current cool-down, ms (doubled by each failed probe).
    #[serde(default)]
    pub cooldown_ms: i64,
    /// A probe is in flight until then (half-open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_until: Option<i64>,
    /// While open, the one job kept in the queue to probe is due then; the
    /// others are parked (a queue whose deferrals cost requests, SQS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker_until: Option<i64>,
    /// Jobs may be parked: the close puts them back in the queue.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parked: bool,
    /// The current run of failed attempts, of any kind.
    #[serde(default, skip_serializing_if = "Streak::is_clear")]
    pub streak: Streak,
}

/// What the breaker lets through at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Jobs go through.
    Closed,
    /// Jobs wait until `until`.
    Open {
        /// When it opened (epoch ms).
        since: i64,
        /// When the cooldown ends and a probe may go (epoch ms).
        until: i64,
    },
    /// One probe may go; `probing` while one is in flight.
    HalfOpen {
        /// When it first opened (epoch ms).
        since: i64,
        /// A probe is in flight: the other jobs still wait.
        probing: bool,
    },
}

impl BreakerState {
    /// `closed`, `open` or `half-open`, as the API shows it.
    pub fn as_str(&self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open { .. } => "open",
            BreakerState::HalfOpen { .. } => "half-open",
        }
    }
}

/// What an attempt says about the callback's health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// No answer, or a 5xx: counts towards opening (the reason is kept).
    Outage(String),
    /// A 2xx: the callback is up and the notification delivered.
    Delivered,
    /// Another answer that is not a 5xx (a 4xx): the callback is up, the attempt failed.
    Reachable,
    /// Says nothing about the callback (the address policy refused it).
    Neutral,
}

impl Health {
    /// What the breaker lets through at `now` (epoch ms).
    pub fn state(&self, now: i64) -> BreakerState {
        match (self.opened_at, self.open_until) {
            (Some(since), Some(until)) if now < until => BreakerState::Open { since, until },
            (Some(since), Some(_)) => BreakerState::HalfOpen {
                since,
                probing: self.probe_until.is_some_and(|p| p > now),
            },
            _ => BreakerState::Closed,
        }
    }

    /// Nothing counted, closed and nothing parked: no write needed to keep it so.
    pub fn is_clear(&self) -> bool {
        self.failures == 0 && self.opened_at.is_none() && !self.parked && self.streak.is_clear()
    }

    /// While open, a job deferred to `at` becomes the one kept in the queue
    /// to probe, unless one is already due later than `now`: `Some` (the
    /// state to write) when it does; the others may then be parked.
    pub fn claim_waker(&self, now: i64, at: i64) -> Option<Health> {
        if self.waker_until.is_some_and(|due| due > now) {
            return None;
        }
        Some(Health {
            rev: self.rev + 1,
            waker_until: Some(at),
            parked: true,
            ..self.clone()
        })
    }

    /// Closed with jobs parked: they are to be put back in the queue.
    pub fn must_unpark(&self, now: i64) -> bool {
        self.parked && self.state(now) == BreakerState::Closed
    }

    /// After the parked jobs are back in the queue.
    pub fn unparked(&self) -> Health {
        Health {
            rev: self.rev + 1,
            parked: false,
            waker_until: None,
            ..self.clone()
        }
    }

    /// The state after an attempt at `now` that gave `signal`, or `None`
    /// when it does not change (a delivery to a healthy callback: no write).
    pub fn after(&self, signal: &Signal, rule: &BreakerRule, now: i64) -> Option<Health> {
        if *signal == Signal::Delivered && self.is_clear() {
            return None;
        }
        let breaker = self.breaker_after(signal, rule, now);
        let base = breaker.as_ref().unwrap_or(self);
        let opened = base.opened_at.is_some() && base.opened_at != self.opened_at;
        let delivered = *signal == Signal::Delivered;
        let streak = self
            .streak
            .after(delivered, opened, rule.failing_after, now);
        Some(Health {
            rev: self.rev + 1,
            streak,
            ..base.clone()
        })
    }

    /// Whether this state (after an attempt) newly makes the subscription
    /// failing (`Some(true)`) or ends a failing streak (`Some(false)`),
    /// compared with `before`: what its organization is told.
    pub fn failing_change(&self, before: &Health) -> Option<bool> {
        (self.streak.failing != before.streak.failing).then_some(self.streak.failing)
    }

    fn breaker_after(&self, signal: &Signal, rule: &BreakerRule, now: i64) -> Option<Health> {
        match signal {
            Signal::Neutral => None,
            Signal::Delivered | Signal::Reachable
                if self.failures == 0 && self.opened_at.is_none() =>
            {
                None
            }
            Signal::Delivered | Signal::Reachable => Some(Health {
                rev: self.rev + 1,
                last_failure_at: self.last_failure_at,
                last_failure: self.last_failure.clone(),
                // Cleared only once the parked jobs are back in the queue.
                parked: self.parked,
                ..Health::default()
            }),
            Signal::Outage(reason) => Some(self.after_outage(reason, rule, now)),
        }
    }

    fn after_outage(&self, reason: &str, rule: &BreakerRule, now: i64) -> Health {
        let mut next = Health {
            rev: self.rev + 1,
            last_failure_at: Some(now),
            last_failure: Some(reason.to_owned()),
            ..self.clone()
        };
        match self.state(now) {
            // A probe failed (or a call that started before it opened
            // ended after the cool-down): open again, for longer.
            BreakerState::HalfOpen { .. } => {
                let cooldown = (self.cooldown_ms.max(millis(rule.cooldown)) * 2)
                    .min(millis(rule.max_cooldown).max(millis(rule.cooldown)));
                next.failures = self.failures.saturating_add(1);
                next.open(now, cooldown);
            }
            // A call that was in flight when it opened: counted only.
            BreakerState::Open { .. } => next.failures = self.failures.saturating_add(1),
            BreakerState::Closed => {
                let in_run = self
                    .last_failure_at
                    .is_some_and(|at| now - at <= millis(rule.window));
                next.failures = if in_run {
                    self.failures.saturating_add(1)
                } else {
                    1
                };
                if next.failures >= rule.failures.max(1) {
                    next.open(now, millis(rule.cooldown));
                }
            }
        }
        next
    }

    fn open(&mut self, now: i64, cooldown_ms: i64) {
        self.opened_at = Some(now);
        self.open_until = Some(now + cooldown_ms);
        self.cooldown_ms = cooldown_ms;
        self.probe_until = None;
    }

    /// This attempt becomes the probe until `now + lease`: `Some` when one
    /// may go now. A scheduled job probes once the cool-down is over; a
    /// person's resend or recover (`manual`) probes at once.
    pub fn claim_probe(&self, now: i64, lease: Duration, manual: bool) -> Option<Health> {
        let may = match self.state(now) {
            BreakerState::Closed => return None,
            BreakerState::Open { .. } => manual && self.probe_until.is_none_or(|p| p <= now),
            BreakerState::HalfOpen { probing, .. } => !probing,
        };
        may.then(|| Health {
            rev: self.rev + 1,
            probe_until: Some(now + millis(lease)),
            ..self.clone()
        })
    }

    /// Until when a job must wait, spread by `random` in `[0, 1]` so the
    /// jobs of a subscription do not all come back at once: past the
    /// cool-down while open, past the probe's lease while one is in flight.
    /// `None` when the breaker lets it through (or it may probe).
    pub fn wait_until(&self, now: i64, random: f64, manual: bool) -> Option<i64> {
        let spread = |base: i64, width: i64| base + (width as f64 * random.clamp(0.0, 1.0)) as i64;
        match self.state(now) {
            BreakerState::Closed => None,
            BreakerState::Open { until, .. } if !manual => {
                Some(spread(until, self.cooldown_ms / 2))
            }
            // Half-open, or open for a person's resend: wait only for a
            // probe in flight.
            _ => self
                .probe_until
                .filter(|probe| *probe > now)
                .map(|probe| spread(probe, (probe - now).max(1000))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000;
    const S: i64 = 1000;

    fn rule() -> BreakerRule {
        BreakerRule {
            failures: 3,
            window: Duration::from_secs(60),
            cooldown: Duration::from_secs(30),
            max_cooldown: Duration::from_secs(100),
            failing_after: 4,
        }
    }

    fn outage() -> Signal {
        Signal::Outage("TIMEOUT".into())
    }

    fn fail(h: &Health, at: i64) -> Health {
        h.after(&outage(), &rule(), at)
            .expect("an outage is counted")
    }

    #[test]
    fn opens_after_a_run_of_outage_failures_within_the_window() {
        let h = fail(&fail(&Health::default(), T0), T0 + S);
        assert_eq!(h.state(T0 + S), BreakerState::Closed);
        assert_eq!(h.failures, 2);
        let h = fail(&h, T0 + 2 * S);
        assert_eq!(
            h.state(T0 + 2 * S),
            BreakerState::Open {
                since: T0 + 2 * S,
                until: T0 + 32 * S
            }
        );
        assert_eq!(h.rev, 3);
    }

    #[test]
    fn a_failure_after_the_window_starts_a_new_run() {
        let h = fail(&fail(&Health::default(), T0), T0 + S);
        let h = fail(&h, T0 + S + 61 * S);
        assert_eq!(
            (h.failures, h.state(T0 + 62 * S)),
            (1, BreakerState::Closed)
        );
    }

    #[test]
    fn answers_that_are_not_outages_reset_the_run_and_neutral_ones_do_not() {
        let h = fail(&fail(&Health::default(), T0), T0 + S);
        let neutral = h.after(&Signal::Neutral, &rule(), T0 + 2 * S).unwrap();
        assert_eq!((neutral.failures, neutral.streak.failures), (2, 3));
        let reset = h.after(&Signal::Reachable, &rule(), T0 + 2 * S).unwrap();
        assert_eq!(reset.failures, 0);
        assert_eq!(reset.last_failure.as_deref(), Some("TIMEOUT"));
        assert_eq!(reset.state(T0 + 2 * S), BreakerState::Closed);
        assert_eq!(reset.streak.failures, 3, "a 4xx is still a failed attempt");
        let delivered = reset
            .after(&Signal::Delivered, &rule(), T0 + 3 * S)
            .unwrap();
        assert!(delivered.is_clear());
        assert_eq!(delivered.after(&Signal::Delivered, &rule(), T0), None);
    }

    /// A streak of any failures makes the subscription failing once, at
    /// `failing_after` or when the breaker opens; a delivery ends it.
    #[test]
    fn a_failing_streak_is_told_once_and_ends_with_a_delivery() {
        let rule = BreakerRule {
            failing_after: 4,
            failures: 10,
            ..rule()
        };
        let mut h = Health::default();
        for i in 0..3 {
            let next = h.after(&Signal::Reachable, &rule, T0 + i * S).unwrap();
            assert_eq!(next.failing_change(&h), None, "failure {}", i + 1);
            h = next;
        }
        assert_eq!((h.streak.failures, h.streak.since), (3, Some(T0)));
        let fourth = h
            .after(&Signal::Outage("TIMEOUT".into()), &rule, T0 + 3 * S)
            .unwrap();
        assert_eq!(fourth.failing_change(&h), Some(true));
        let fifth = fourth.after(&Signal::Reachable, &rule, T0 + 4 * S).unwrap();
        assert_eq!(fifth.failing_change(&fourth), None, "told once per streak");
        let recovered = fifth.after(&Signal::Delivered, &rule, T0 + 5 * S).unwrap();
        assert_eq!(recovered.failing_change(&fifth), Some(false));
        assert!(recovered.streak.is_clear());
        // The breaker opening makes it failing before `failing_after`.
        let opens = BreakerRule {
            failures: 2,
            ..rule
        };
        let one = Health::default().after(&outage(), &opens, T0).unwrap();
        let two = one.after(&outage(), &opens, T0 + S).unwrap();
        assert!(matches!(two.state(T0 + S), BreakerState::Open { .. }));
        assert_eq!(two.failing_change(&one), Some(true));
    }

    /// closed → open → half-open → closed, and half-open → open (for twice
    /// as long, up to the maximum) on a failed probe.
    #[test]
    fn transitions_on_a_moved_clock() {
        let mut h = Health::default();
        for i in 0..3 {
            h = fail(&h, T0 + i * S);
        }
        let opened = T0 + 2 * S;
        assert!(matches!(
            h.state(opened + 29 * S),
            BreakerState::Open { .. }
        ));
        // While open, scheduled jobs wait past the cool-down, spread over half of it.
        assert_eq!(h.wait_until(opened + S, 0.0, false), Some(opened + 30 * S));
        assert_eq!(h.wait_until(opened + S, 1.0, false), Some(opened + 45 * S));
        assert_eq!(
            h.claim_probe(opened + S, Duration::from_secs(5), false),
            None
        );
        // Half-open: one probe.
        let at = opened + 30 * S;
        assert_eq!(
            h.state(at),
            BreakerState::HalfOpen {
                since: opened,
                probing: false
            }
        );
        assert_eq!(h.wait_until(at, 0.5, false), None);
        let probing = h.claim_probe(at, Duration::from_secs(5), false).unwrap();
        assert_eq!(
            probing.state(at + S),
            BreakerState::HalfOpen {
                since: opened,
                probing: true
            }
        );
        assert_eq!(
            probing.claim_probe(at + S, Duration::from_secs(5), false),
            None
        );
        assert_eq!(probing.wait_until(at + S, 0.0, false), Some(at + 5 * S));
        // A failed probe opens it again for 60 s, then 100 s (the maximum).
        let reopened = fail(&probing, at + 2 * S);
        assert_eq!(
            reopened.state(at + 2 * S),
            BreakerState::Open {
                since: at + 2 * S,
                until: at + 62 * S
            }
        );
        let again = fail(
            &reopened
                .claim_probe(at + 62 * S, Duration::from_secs(5), false)
                .unwrap(),
            at + 63 * S,
        );
        assert_eq!(again.open_until, Some(at + 163 * S));
        // A successful probe closes it.
        let closed = again
            .after(&Signal::Reachable, &rule(), at + 164 * S)
            .unwrap();
        assert_eq!(closed.state(at + 164 * S), BreakerState::Closed);
        assert_eq!((closed.failures, closed.cooldown_ms), (0, 0));
    }

    #[test]
    fn a_manual_resend_probes_at_once_while_open() {
        let mut h = Health::default();
        for i in 0..3 {
            h = fail(&h, T0 + i * S);
        }
        let now = T0 + 3 * S;
        assert_eq!(h.wait_until(now, 0.0, true), None);
        let probing = h.claim_probe(now, Duration::from_secs(5), true).unwrap();
        // Only one at a time: a second manual job waits for the probe.
        assert_eq!(
            probing.claim_probe(now + S, Duration::from_secs(5), true),
            None
        );
        assert_eq!(probing.wait_until(now + S, 0.0, true), Some(now + 5 * S));
    }

    #[test]
    fn failures_of_calls_in_flight_when_it_opened_only_count() {
        let mut h = Health::default();
        for i in 0..3 {
            h = fail(&h, T0 + i * S);
        }
        let late = fail(&h, T0 + 4 * S);
        assert_eq!(late.open_until, h.open_until);
        assert_eq!(late.failures, 4);
    }

    #[test]
    fn stored_form_is_small_and_round_trips() {
        let h = fail(&Health::default(), T0);
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(
            json,
            r#"{"rev":1,"failures":1,"lastFailureAt":1800000000000,"lastFailure":"TIMEOUT","cooldownMs":0,"streak":{"failures":1,"since":1800000000000}}"#
        );
        assert_eq!(serde_json::from_str::<Health>(&json).unwrap(), h);
        assert_eq!(
            serde_json::from_str::<Health>("{}").unwrap(),
            Health::default()
        );
    }
}
