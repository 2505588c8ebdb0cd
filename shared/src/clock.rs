//! The clock port: every "now" of the service comes from here, so tests of
//! expiry, blacklisting and retry timing run on a clock they move by hand
//! instead of sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Tells the time; every timestamp of the service is read through it.
pub trait Clock: Send + Sync {
    /// Epoch milliseconds now.
    fn now_ms(&self) -> i64;
}

/// The operating system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }
}

/// The wall clock, shared: the default of every runtime.
pub fn system() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// A clock that stands still until moved: for tests.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock standing at `ms` epoch milliseconds.
    pub fn at(ms: i64) -> Arc<Self> {
        Arc::new(ManualClock(AtomicI64::new(ms)))
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(by, Ordering::SeqCst);
    }

    /// Puts the clock at `ms` epoch milliseconds (backwards too).
    pub fn set(&self, ms: i64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// ISO 8601 UTC with milliseconds: `2024-03-10T18:07:52.534Z`.
/// (chrono's RFC 3339 writer: a list renders three per subscription, and
/// it is ~10× faster than a `format` string, which is parsed at every call.)
pub fn iso_millis(ms: i64) -> String {
    use chrono::Datelike;
    let at = chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
    if (0..=9999).contains(&at.year()) {
        at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    } else {
        at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
    }
}

/// A duration as whole milliseconds, saturating.
pub fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::at(1_000);
        assert_eq!(clock.now_ms(), 1_000);
        clock.advance(Duration::from_secs(2));
        assert_eq!(clock.now_ms(), 3_000);
        clock.set(5);
        assert_eq!(clock.now_ms(), 5);
    }

    #[test]
    fn iso_has_milliseconds() {
        assert_eq!(iso_millis(1_710_094_072_534), "2024-03-10T18:07:52.534Z");
        assert_eq!(iso_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_millis(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(iso_millis(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
        assert_eq!(
            iso_millis(253_402_300_800_000),
            "+10000-01-01T00:00:00.000Z"
        );
        assert_eq!(iso_millis(i64::MAX), "1970-01-01T00:00:00.000Z");
    }
}
