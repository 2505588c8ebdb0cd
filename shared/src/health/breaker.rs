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
use crate::failure::Failure;

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
    /// Why the last counted failure failed (stored as `TIMEOUT`, ... or `status <n>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<Failure>,
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
    /// The receiver asked for a pause (a `429` or `503` with `Retry-After`):
    /// none of the subscription's jobs is attempted before then (epoch ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_until: Option<i64>,
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
    /// No answer, or a 5xx: counts towards opening (why is kept).
    Outage(Failure),
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

    /// Until when the receiver asked the subscription's jobs to wait, if
    /// that is later than `now`.
    pub fn paused(&self, now: i64) -> Option<i64> {
        self.paused_until.filter(|until| *until > now)
    }

    /// This state with the receiver's pause until `until` (the later of
    /// two pauses holds).
    pub fn pause(&self, until: i64) -> Health {
        Health {
            rev: self.rev + 1,
            paused_until: Some(self.paused_until.map_or(until, |p| p.max(until))),
            ..self.clone()
        }
    }

    /// Until when a job must wait for the receiver's pause, spread by
    /// `random` in `[0, 1]` over a tenth of what is left of it (at most a
    /// second), so the held jobs do not all come back at once. `None` when
    /// not paused.
    pub fn pause_wait(&self, now: i64, random: f64) -> Option<i64> {
        let until = self.paused(now)?;
        let width = ((until - now) / 10).clamp(0, 1_000);
        Some(until + (width as f64 * random.clamp(0.0, 1.0)) as i64)
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
                last_failure: self.last_failure,
                // Cleared only once the parked jobs are back in the queue.
                parked: self.parked,
                // A receiver's pause outlives the breaker.
                paused_until: self.paused_until,
                ..Health::default()
            }),
            Signal::Outage(failure) => Some(self.after_outage(*failure, rule, now)),
        }
    }

    fn after_outage(&self, failure: Failure, rule: &BreakerRule, now: i64) -> Health {
        let mut next = Health {
            rev: self.rev + 1,
            last_failure_at: Some(now),
            last_failure: Some(failure),
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
mod tests;
