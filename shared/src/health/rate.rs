//! A subscription's rate limit (`rateLimit`, notifications per second,
//! opt-in): the arithmetic every runtime applies. docs/decisions/rate-limit.md.
//!
//! **The rule.** A rate-limited subscription's deliveries start in slots
//! [`spacing_us`] apart, `(1 s + GUARD_MS) / rateLimit`, each reserved
//! before its start; a delivery waits in the process for its slot (at most
//! [`HORIZON_MS`] ahead) and starts no later than [`LATE_MS`] after it, or
//! is not sent then. So `rateLimit + 1` starts span more than a second:
//! in any one second, however it is cut, at most `rateLimit` start, and at
//! most `rateLimit` arrive while the requests' times on the way differ by
//! less than [`transit_tolerance_ms`]. Every attempt takes a slot (a retry,
//! a resend), not only first ones.
//!
//! The next free slot is one number per subscription (a "theoretical
//! arrival time": [`Pace`]): a slot is `max(next, now)`, and taking it moves
//! `next` one spacing past it.
//!
//! - SQLite: the lease keeps each rate-limited subscription's [`Pace`] and
//!   takes no more of its jobs than it has slots within the horizon, each
//!   lease carrying its slot (`sqlite/queue.rs`);
//! - SQS (the poller and the Lambda): the next free slot in DynamoDB, one
//!   conditional write per attempt
//!   ([`Store::reserve_rate_slot`](crate::store::Store::reserve_rate_slot));
//!   a job whose slot would be past the horizon is deferred (no attempt
//!   counted) to its turn in the subscription's waiting line in this
//!   process ([`RateLines`]).
//!
//! State and arithmetic only: nothing here reads a port or sleeps.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

use crate::ids::SubscriptionId;

/// The smallest `rateLimit` (notifications per second).
pub const MIN_RATE_LIMIT: u32 = 1;
/// The largest `rateLimit`: a DynamoDB item takes at most 1,000 writes a
/// second (its partition's limit), and a subscription's next slot is one
/// item.
pub const MAX_RATE_LIMIT: u32 = 1_000;

/// What the spacing adds to the second (ms): `rateLimit` slots span
/// `1 s + GUARD_MS`, so a start late by up to [`LATE_MS`] (and a slot's
/// rounding to the millisecond) and a request's time on the way varying
/// by less than [`transit_tolerance_ms`] cannot put `rateLimit + 1`
/// arrivals in one second. It costs `GUARD_MS / (1 s + GUARD_MS)` of the
/// limit: a backlog drains at most at 90.9 % of `rateLimit`.
pub const GUARD_MS: i64 = 100;

/// How far ahead a slot is taken (ms): a delivery waits in the process at
/// most this long for its slot; past it, the job waits in the queue.
pub const HORIZON_MS: i64 = 1_000;

/// How late after its slot a delivery may still start (ms); later (the
/// process was starved), it is not sent then, and takes another slot.
pub const LATE_MS: i64 = 20;

/// How much two requests' times from start to arrival may differ with the
/// rule still holding at the receiver (ms): the guard less the lateness
/// allowed and a slot's rounding up to the millisecond.
pub const fn transit_tolerance_ms() -> i64 {
    GUARD_MS - LATE_MS - 1
}

/// The distance between two slots of a subscription limited to `limit` a
/// second (µs), rounded up: `limit` of them span at least `1 s + GUARD_MS`.
pub fn spacing_us(limit: u32) -> i64 {
    let per_second = (1_000 + GUARD_MS) * 1_000;
    let limit = i64::from(limit.max(1));
    (per_second + limit - 1) / limit
}

/// A time in µs, as the millisecond a delivery waits for (rounded up, so
/// it never starts before its slot).
pub fn ms_of(us: i64) -> i64 {
    us.div_euclid(1_000) + i64::from(us.rem_euclid(1_000) != 0)
}

/// A reservation's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserved {
    /// The slot taken: the delivery starts at this time (epoch ms), or
    /// within [`LATE_MS`] after it.
    At(i64),
    /// No slot within the horizon: the next free one is at this time
    /// (epoch µs); nothing was taken.
    Full(i64),
}

/// A subscription's next free slot (epoch µs): what the SQLite lease keeps
/// per rate-limited subscription, and what the DynamoDB item holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pace {
    /// The next free slot (epoch µs); one in the past means "now".
    pub next: i64,
}

impl Pace {
    /// How many slots start within the horizon of `now` (epoch ms).
    pub fn room(&self, limit: u32, now: i64) -> u32 {
        let now_us = now.saturating_mul(1_000);
        let first = self.next.max(now_us);
        let end = now_us + HORIZON_MS * 1_000;
        if first > end {
            return 0;
        }
        let n = (end - first) / spacing_us(limit) + 1;
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// Takes the first free slot at or after `now` (epoch ms) if it is
    /// within the horizon.
    pub fn reserve(&mut self, limit: u32, now: i64) -> Reserved {
        let now_us = now.saturating_mul(1_000);
        let slot = self.next.max(now_us);
        if slot > now_us + HORIZON_MS * 1_000 {
            return Reserved::Full(slot);
        }
        self.next = slot + spacing_us(limit);
        Reserved::At(ms_of(slot))
    }
}

/// Past this many lines, those whose turns are all past are forgotten.
const MAX_LINES: usize = 10_000;

/// The waiting lines of rate-limited subscriptions, in this process (SQS):
/// where a job with no slot within the horizon is deferred to, and the
/// next free slot this process last saw in the store (it only moves
/// forward, so while it is past the horizon the job is deferred without
/// asking the store again).
#[derive(Debug, Default)]
pub struct RateLines {
    lines: Mutex<HashMap<SubscriptionId, Line>>,
    /// How long reserving a slot in the store takes lately (ms): a slot is
    /// reserved this far ahead, so the answer comes back before it.
    lead: AtomicI64,
}

/// The most a slot is reserved ahead for the store's answer (ms).
const MAX_LEAD_MS: i64 = 500;

/// One subscription's line: the next free slot last seen in the store and
/// the end of the turns given (epoch µs).
#[derive(Debug, Clone, Copy, Default)]
struct Line {
    seen: i64,
    end: i64,
}

impl RateLines {
    /// How far ahead of now to reserve a slot (ms): the store's recent
    /// answer time, and a few ms for the way to the POST.
    pub fn lead(&self) -> i64 {
        self.lead.load(Ordering::Relaxed) + 5
    }

    /// A reservation took `ms`: the lead follows a slower answer at once
    /// and a faster one by an eighth at a time.
    pub fn took(&self, ms: i64) {
        let ms = ms.clamp(0, MAX_LEAD_MS);
        let _ = self
            .lead
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |lead| {
                Some(ms.max(lead - lead / 8))
            });
    }

    /// The next free slot this process last saw for `subscription`, if it
    /// is past the horizon of `now` (epoch ms): no slot to take now.
    pub fn known_full(&self, subscription: &SubscriptionId, now: i64) -> Option<i64> {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        let seen = lines.get(subscription)?.seen;
        (seen > (now + HORIZON_MS).saturating_mul(1_000)).then_some(seen)
    }

    /// Whether this process last saw `subscription`'s next free slot after
    /// `now` (a backlog): the store's first guess.
    pub fn busy(&self, subscription: &SubscriptionId, now: i64) -> bool {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        lines
            .get(subscription)
            .is_some_and(|line| line.seen > now.saturating_mul(1_000))
    }

    /// The store answered: `next` (epoch µs) is the subscription's next free slot.
    pub fn saw(&self, subscription: &SubscriptionId, next: i64) {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        let line = lines.entry(subscription.clone()).or_default();
        line.seen = line.seen.max(next);
    }

    /// When a job of `subscription` with no slot at `now` (epoch ms) comes
    /// back: its turn is the next slot of this line after the store's next
    /// free one, and it comes back a horizon before it (but at least a
    /// second later: SQS delays by whole seconds), so it finds its slot
    /// within reach. A backlog is spread over the slots it needs, each job
    /// coming back about once; several processes each keep a line, and
    /// their turns meet in the store, where the extra ones wait again.
    pub fn turn(&self, subscription: &SubscriptionId, limit: u32, now: i64) -> i64 {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        let now_us = now.saturating_mul(1_000);
        if lines.len() >= MAX_LINES && !lines.contains_key(subscription) {
            lines.retain(|_, line| line.end > now_us);
        }
        let line = lines.entry(subscription.clone()).or_default();
        let slot = line.end.max(line.seen).max(now_us);
        line.end = slot + spacing_us(limit);
        (ms_of(slot) - HORIZON_MS).max(now + 1_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_slots_span_a_second_and_the_guard() {
        for limit in [1, 3, 7, 10, 50, 999, 1_000] {
            let span = spacing_us(limit) * i64::from(limit);
            assert!(span >= 1_100_000, "{limit}: {span}");
            assert!(
                span < 1_100_000 + i64::from(limit),
                "{limit}: rounded up by under 1 µs a slot"
            );
        }
        assert_eq!(spacing_us(10), 110_000);
        assert_eq!(spacing_us(1_000), 1_100);
        assert_eq!(ms_of(1_000), 1);
        assert_eq!(ms_of(1_001), 2);
        assert_eq!(transit_tolerance_ms(), 79);
    }

    #[test]
    fn slots_are_spaced_from_now_and_never_past_the_horizon() {
        let mut pace = Pace::default();
        let now = 5_000;
        assert_eq!(
            pace.room(10, now),
            10,
            "0, 110, …, 990 ms: ten within the second"
        );
        assert_eq!(pace.reserve(10, now), Reserved::At(5_000));
        assert_eq!(pace.reserve(10, now), Reserved::At(5_110));
        assert_eq!(pace.room(10, now), 8);
        for _ in 0..8 {
            assert!(matches!(pace.reserve(10, now), Reserved::At(_)));
        }
        assert_eq!(pace.room(10, now), 0);
        assert_eq!(pace.reserve(10, now), Reserved::Full(6_100_000));
        assert_eq!(pace.next, 6_100_000, "a refusal takes nothing");
        // Idle a while: the next slot is now, not the past's free ones.
        assert_eq!(pace.reserve(10, 9_000), Reserved::At(9_000));
        assert_eq!(pace.reserve(10, 9_010), Reserved::At(9_110));
    }

    /// The rule as a receiver counts it: whatever the reservations' times,
    /// `limit + 1` slots span more than a second and the guard, so starts
    /// late by up to `LATE_MS` still leave `limit` in any second.
    #[test]
    fn any_second_holds_at_most_the_limit_of_starts() {
        for limit in [1u32, 3, 10, 50, 1_000] {
            let mut pace = Pace::default();
            let mut slots = Vec::new();
            let mut now = 1_000_000;
            // Reservations at uneven times, some bursts, some gaps.
            for i in 0..(limit as i64 * 5) {
                now += [0, 1, 7, 300, 0, 40][(i % 6) as usize];
                if let Reserved::At(at) = pace.reserve(limit, now) {
                    slots.push(at);
                }
            }
            let n = limit as usize;
            for w in slots.windows(n + 1) {
                // The first starts as late as it may, the last on time.
                assert!(w[n] - (w[0] + LATE_MS) > 1_000, "{limit}: {w:?}");
            }
        }
    }

    #[test]
    fn the_line_spreads_a_backlog_one_spacing_a_turn_a_horizon_ahead() {
        let lines = RateLines::default();
        let sub: SubscriptionId = "s".into();
        let now = 7_250;
        assert_eq!(lines.known_full(&sub, now), None);
        assert!(!lines.busy(&sub, now));
        // The store said the next free slot is at 8.5 s.
        lines.saw(&sub, 8_500_000);
        assert!(lines.busy(&sub, now));
        assert_eq!(lines.known_full(&sub, now), Some(8_500_000));
        assert_eq!(lines.known_full(&sub, 7_500), None, "within the horizon");
        let turns: Vec<i64> = (0..4).map(|_| lines.turn(&sub, 10, now)).collect();
        // Slots 8,500, 8,610, 8,720, 8,830, back a horizon before (at least a second later).
        assert_eq!(turns, [8_250, 8_250, 8_250, 8_250]);
        let later: Vec<i64> = (0..30).map(|_| lines.turn(&sub, 10, now)).collect();
        assert_eq!(later[29], 8_500 + 33 * 110 - 1_000);
        // Once the line's turns are past, it starts again from now.
        assert_eq!(lines.turn(&sub, 10, 60_000), 61_000);
        // Another subscription has its own line.
        assert_eq!(lines.turn(&"t".into(), 10, now), 8_250);
        // What was seen only moves forward.
        lines.saw(&sub, 1);
        assert!(lines.busy(&sub, now));
    }

    #[test]
    fn the_lead_follows_a_slow_store_at_once_and_a_fast_one_slowly() {
        let lines = RateLines::default();
        assert_eq!(lines.lead(), 5);
        lines.took(80);
        assert_eq!(lines.lead(), 85);
        lines.took(8);
        assert_eq!(lines.lead(), 75, "70 = 80 less an eighth");
        lines.took(10_000);
        assert_eq!(lines.lead(), MAX_LEAD_MS + 5, "bounded");
    }
}
