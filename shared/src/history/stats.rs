//! Figures for a chart of a subscription's deliveries: per hour of creation,
//! how many notifications were delivered, failed and needed retries, and
//! the attempt durations' percentiles. A pure function of the history's rows.

use serde::Serialize;

use super::{NotificationStatus, StatsRow};
use crate::clock::iso_millis;

/// An hour in milliseconds: the width of a stats bucket.
pub const HOUR_MS: i64 = 3_600_000;

/// Notifications by what became of them (`delivered`, `failed`, `retried`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Answered 2xx.
    pub delivered: u64,
    /// Given up.
    pub failed: u64,
    /// Needed more than one attempt (whatever became of them).
    pub retried: u64,
}

/// One hour of `GET /webhooksubscription/{id}/stats` (`StatsBucket`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// The hour's start, ISO 8601 UTC.
    pub start: String,
    /// The notifications created in the hour.
    #[serde(flatten)]
    pub counts: Counts,
}

/// The whole window's figures (`StatsTotals`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// The notifications created in the window.
    #[serde(flatten)]
    pub counts: Counts,
    /// Still waiting for an attempt or a retry.
    pub pending: u64,
    /// Every notification created in the window.
    pub notifications: u64,
}

/// Attempt durations of the window (`DurationPercentiles`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Durations {
    /// How many attempt durations the percentiles are over.
    pub count: u64,
    /// Median attempt duration (ms, nearest rank); None when `count` is 0.
    pub p50: Option<u64>,
    /// 99th percentile attempt duration (ms, nearest rank); None when `count` is 0.
    pub p99: Option<u64>,
}

/// The answer of `GET /webhooksubscription/{id}/stats` (`DeliveryStats`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// `since`: the window's start, after moving it up to the retention's start.
    pub since: String,
    /// `until`: the window's end (exclusive); never before `since`.
    pub until: String,
    /// One per hour from the hour of `since` to `until`, empty hours included.
    pub buckets: Vec<Bucket>,
    /// `totals`: the whole window's figures.
    pub totals: Totals,
    /// `durationMs`: attempt duration percentiles.
    #[serde(rename = "durationMs")]
    pub duration_ms: Durations,
}

impl Counts {
    fn add(&mut self, row: &StatsRow) {
        match row.status {
            NotificationStatus::Delivered => self.delivered += 1,
            NotificationStatus::Failed => self.failed += 1,
            NotificationStatus::Pending => {}
        }
        if row.attempts > 1 {
            self.retried += 1;
        }
    }
}

/// The stats of `rows` (notifications created in `[since, until)`).
pub fn compute(rows: &[StatsRow], since: i64, until: i64) -> Stats {
    let first = since.div_euclid(HOUR_MS) * HOUR_MS;
    let hours = usize::try_from((until - first + HOUR_MS - 1).div_euclid(HOUR_MS)).unwrap_or(0);
    let mut buckets: Vec<Bucket> = (0..hours)
        .map(|h| Bucket {
            start: iso_millis(first + h as i64 * HOUR_MS),
            counts: Counts::default(),
        })
        .collect();
    let mut totals = Totals {
        counts: Counts::default(),
        pending: 0,
        notifications: 0,
    };
    let mut durations: Vec<u64> = Vec::new();
    for row in rows
        .iter()
        .filter(|r| r.created_at >= since && r.created_at < until)
    {
        let hour = usize::try_from((row.created_at - first) / HOUR_MS).unwrap_or(0);
        if let Some(bucket) = buckets.get_mut(hour) {
            bucket.counts.add(row);
        }
        totals.counts.add(row);
        totals.notifications += 1;
        if row.status == NotificationStatus::Pending {
            totals.pending += 1;
        }
        durations.extend(&row.durations_ms);
    }
    durations.sort_unstable();
    Stats {
        since: iso_millis(since),
        until: iso_millis(until),
        buckets,
        totals,
        duration_ms: Durations {
            count: durations.len() as u64,
            p50: percentile(&durations, 50),
            p99: percentile(&durations, 99),
        },
    }
}

/// The nearest-rank percentile of sorted values.
fn percentile(sorted: &[u64], p: usize) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(created_at: i64, status: NotificationStatus, attempts: u32, d: &[u64]) -> StatsRow {
        StatsRow {
            created_at,
            status,
            attempts,
            durations_ms: d.to_vec(),
        }
    }

    #[test]
    fn buckets_count_by_hour_of_creation() {
        let t0 = 1_700_000_000_000 / HOUR_MS * HOUR_MS;
        let rows = [
            row(t0 + 5, NotificationStatus::Delivered, 1, &[10]),
            row(t0 + 10, NotificationStatus::Delivered, 2, &[500, 20]),
            row(
                t0 + HOUR_MS + 1,
                NotificationStatus::Failed,
                3,
                &[30, 30, 30],
            ),
            row(t0 + 2 * HOUR_MS, NotificationStatus::Pending, 0, &[]),
            row(t0 + 5 * HOUR_MS, NotificationStatus::Delivered, 1, &[1]),
        ];
        let s = compute(&rows, t0 + 1, t0 + 3 * HOUR_MS);
        assert_eq!(s.buckets.len(), 3);
        assert_eq!(s.buckets[0].start, iso_millis(t0));
        // Created before `since` (t0 + 1)? No: t0 + 5 is inside.
        assert_eq!(
            s.buckets[0].counts,
            Counts {
                delivered: 2,
                failed: 0,
                retried: 1
            }
        );
        assert_eq!(
            s.buckets[1].counts,
            Counts {
                delivered: 0,
                failed: 1,
                retried: 1
            }
        );
        assert_eq!(s.totals.pending, 1);
        assert_eq!(s.totals.notifications, 4, "the one past `until` is out");
        assert_eq!(s.duration_ms.count, 6);
        assert_eq!(s.duration_ms.p50, Some(30));
        assert_eq!(s.duration_ms.p99, Some(500));
    }

    #[test]
    fn an_empty_window_has_zero_buckets_and_no_percentiles() {
        let s = compute(&[], 0, 2 * HOUR_MS);
        assert_eq!(s.buckets.len(), 2);
        assert_eq!(s.duration_ms.p50, None);
        assert_eq!(s.totals.notifications, 0);
    }
}
