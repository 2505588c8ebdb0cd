//! A subscription's rate limit (`rateLimit`, notifications per second,
//! opt-in): the arithmetic every runtime applies. docs/decisions/rate-limit.md.
//!
//! **The rule.** Time is cut into windows of one second, aligned on the
//! epoch (window `w` is `[w·1000, (w+1)·1000)` ms); at most `rateLimit`
//! deliveries of the subscription start in one window. Every attempt counts
//! (a retry, a resend), not only first ones.
//!
//! - SQLite: the lease keeps the count of each rate-limited subscription's
//!   current window ([`WindowCount`]) and takes no more of its jobs than the
//!   window has room for (`sqlite/queue.rs`);
//! - SQS (the poller and the Lambda): a count per window in DynamoDB, one
//!   conditional write per attempt
//!   ([`Store::take_rate_slot`](crate::store::Store::take_rate_slot)); a job
//!   over the limit is deferred (no attempt counted) to its turn in the
//!   subscription's waiting line ([`RateLines`]), a later window with room
//!   in this process's line, at the same fraction of a second (SQS delays a
//!   message by whole seconds).
//!
//! State and arithmetic only: nothing here reads a port.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::ids::SubscriptionId;

/// The smallest `rateLimit` (notifications per second).
pub const MIN_RATE_LIMIT: u32 = 1;
/// The largest `rateLimit`: a DynamoDB item takes at most 1,000 writes a
/// second (its partition's limit), and the window's count is one item.
pub const MAX_RATE_LIMIT: u32 = 1_000;

/// A window's length (ms).
pub const WINDOW_MS: i64 = 1_000;

/// The window `now` (epoch ms) falls in.
pub fn window(now: i64) -> i64 {
    now.div_euclid(WINDOW_MS)
}

/// When window `w` starts (epoch ms).
pub fn window_start(w: i64) -> i64 {
    w.saturating_mul(WINDOW_MS)
}

/// The deliveries started in a subscription's current window: what the
/// SQLite lease keeps per rate-limited subscription.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowCount {
    /// The window counted.
    pub window: i64,
    /// Deliveries started in it.
    pub taken: u32,
}

impl WindowCount {
    /// How many more may start at `now` under `limit`: the limit in a new
    /// window, what is left of it in the current one.
    pub fn room(&self, limit: u32, now: i64) -> u32 {
        if window(now) != self.window {
            return limit;
        }
        limit.saturating_sub(self.taken)
    }

    /// `n` deliveries start at `now` (the caller asked [`WindowCount::room`] first).
    pub fn take(&mut self, n: u32, now: i64) {
        let w = window(now);
        if w != self.window {
            *self = WindowCount {
                window: w,
                taken: 0,
            };
        }
        self.taken = self.taken.saturating_add(n);
    }
}

/// Past this many lines, those whose turns are all past are forgotten.
const MAX_LINES: usize = 10_000;

/// The waiting lines of rate-limited subscriptions, in this process (SQS):
/// where a job over its subscription's limit is deferred to, and which
/// window this process already found full (so it defers without asking
/// DynamoDB again in that window).
#[derive(Debug, Default)]
pub struct RateLines {
    lines: Mutex<HashMap<SubscriptionId, Line>>,
}

/// One subscription's line: the window of its next turn, the turns given
/// in it, and the last window found full.
#[derive(Debug, Clone, Copy, Default)]
struct Line {
    window: i64,
    given: u32,
    full: i64,
}

impl RateLines {
    /// Whether this process found `subscription`'s window of `now` full.
    pub fn known_full(&self, subscription: &SubscriptionId, now: i64) -> bool {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        lines
            .get(subscription)
            .is_some_and(|line| line.full == window(now))
    }

    /// When a job of `subscription` found over `limit` at `now` is to come
    /// back: the first window after `now`'s that has fewer than `limit`
    /// turns in this line, at the same fraction of a second as `now` (a
    /// whole number of seconds later: SQS's delays are whole seconds). So a
    /// backlog is spread over the windows it needs and each job comes back
    /// about once; several processes each keep a line, and their turns meet
    /// in the store's count, where the extra ones are deferred again.
    pub fn turn(&self, subscription: &SubscriptionId, limit: u32, now: i64) -> i64 {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        let current = window(now);
        if lines.len() >= MAX_LINES && !lines.contains_key(subscription) {
            lines.retain(|_, line| line.window > current);
        }
        let line = lines.entry(subscription.clone()).or_default();
        line.full = current;
        if line.window <= current {
            *line = Line {
                window: current + 1,
                given: 0,
                full: current,
            };
        }
        let at = now + (line.window - current) * WINDOW_MS;
        line.given += 1;
        if line.given >= limit.max(1) {
            line.window += 1;
            line.given = 0;
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_whole_seconds_of_the_epoch() {
        assert_eq!(window(0), 0);
        assert_eq!(window(999), 0);
        assert_eq!(window(1_000), 1);
        assert_eq!(window(1_700_000_000_123), 1_700_000_000);
        assert_eq!(window(-1), -1);
        assert_eq!(window_start(window(12_345)), 12_000);
    }

    #[test]
    fn a_window_gives_the_limit_then_nothing_until_the_next() {
        let mut count = WindowCount::default();
        let t = 5_000;
        assert_eq!(count.room(3, t), 3);
        count.take(2, t);
        assert_eq!(count.room(3, t + 10), 1);
        count.take(1, t + 999);
        assert_eq!(count.room(3, t + 999), 0);
        // The next window starts afresh, whatever was taken before.
        assert_eq!(count.room(3, t + 1_000), 3);
        count.take(1, t + 1_000);
        assert_eq!(
            count,
            WindowCount {
                window: 6,
                taken: 1
            }
        );
        // A limit lowered meanwhile leaves no room, never a negative one.
        count.take(5, t + 1_001);
        assert_eq!(count.room(2, t + 1_001), 0);
    }

    /// Under the lease's rule, `n` jobs queued at once at `limit` a second
    /// start at `limit` a window: the last one in window `ceil(n/limit) - 1`.
    #[test]
    fn a_backlog_drains_at_the_limit() {
        let (limit, n) = (50u32, 1_000u32);
        let mut count = WindowCount::default();
        let mut started = [0u32; 21];
        let mut left = n;
        // A lease every 50 ms, as the workers poll when idle.
        let mut now = 10_000;
        while left > 0 {
            let room = count.room(limit, now).min(left);
            count.take(room, now);
            started[(window(now) - 10) as usize] += room;
            left -= room;
            now += 50;
        }
        assert_eq!(&started[..20], &[50; 20]);
        assert_eq!(started[20], 0);
    }

    #[test]
    fn the_line_gives_each_later_window_the_limit_at_the_same_fraction() {
        let lines = RateLines::default();
        let sub: SubscriptionId = "s".into();
        let now = 7_250;
        assert!(!lines.known_full(&sub, now));
        let turns: Vec<i64> = (0..7).map(|_| lines.turn(&sub, 3, now)).collect();
        assert_eq!(
            turns,
            [8_250, 8_250, 8_250, 9_250, 9_250, 9_250, 10_250],
            "3 a window, from the next one"
        );
        assert!(lines.known_full(&sub, now + 700));
        assert!(
            !lines.known_full(&sub, now + 750),
            "the next window is not known full"
        );
        // Later in the same line: behind the turns already given.
        assert_eq!(lines.turn(&sub, 3, 7_900), 10_900);
        // Once the line's turns are past, it starts again after now.
        assert_eq!(lines.turn(&sub, 3, 20_100), 21_100);
        // Another subscription has its own line.
        assert_eq!(lines.turn(&"t".into(), 3, now), 8_250);
    }
}
