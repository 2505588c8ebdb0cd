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
/// The calendar is chrono's; the fixed-width digits are written here: a list
/// renders three dates per subscription, and chrono's RFC 3339 writer (its
/// `fmt` machinery, a growing String) cost ~800 instructions a date, a tenth
/// of a page (docs/performance-history.md#the-rules-once-and-the-list-pages-json-issue-26). Years outside 0–9999 keep chrono's
/// format string (a sign and more digits).
pub fn iso_millis(ms: i64) -> String {
    use chrono::{Datelike, Timelike};
    let at = chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
    let Ok(year) = u32::try_from(at.year()) else {
        return at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string();
    };
    if year > 9999 {
        return at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string();
    }
    let mut text = [0u8; 24];
    let mut put = |at: usize, width: usize, mut value: u32| {
        for digit in text[at..at + width].iter_mut().rev() {
            *digit = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, 4, year);
    put(5, 2, at.month());
    put(8, 2, at.day());
    put(11, 2, at.hour());
    put(14, 2, at.minute());
    put(17, 2, at.second());
    // A leap second's millisecond (≥ 1000) is not representable here: chrono
    // shows it as 60 seconds' worth; timestamps from millis never carry one.
    put(20, 3, at.timestamp_subsec_millis() % 1000);
    for (i, separator) in [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
        (23, b'Z'),
    ] {
        text[i] = separator;
    }
    String::from_utf8_lossy(&text).into_owned()
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
        assert_eq!(iso_millis(-62_167_219_200_000), "0000-01-01T00:00:00.000Z");
        assert_eq!(iso_millis(-62_167_219_200_001), "-0001-12-31T23:59:59.999Z");
    }

    /// The same text as chrono's RFC 3339 writer, over the years 0–9999.
    #[test]
    fn iso_is_chronos_rfc3339() {
        let (first, last) = (-62_167_219_200_000_i64, 253_402_300_799_999_i64);
        let step = (last - first) / 100_003;
        for ms in (first..=last)
            .step_by(step as usize)
            .chain([first, last, 0, 999, 86_399_999])
        {
            let chrono = chrono::DateTime::from_timestamp_millis(ms)
                .unwrap()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            assert_eq!(iso_millis(ms), chrono, "{ms}");
        }
    }
}
