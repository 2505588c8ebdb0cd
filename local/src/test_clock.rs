//! `WEBHOOKS_TEST_CLOCK_FILE`: the wall clock moved forward by the number of
//! milliseconds written in a file, read at every reading. End-to-end tests
//! make time pass (an expiry, a grace period) by writing the file instead of
//! sleeping. Never set in production: whoever writes the file moves time.

use std::path::PathBuf;

use webhook_core::clock::{Clock, SystemClock};

pub struct FileOffsetClock {
    path: PathBuf,
}

impl FileOffsetClock {
    pub fn new(path: PathBuf) -> Self {
        FileOffsetClock { path }
    }

    /// The offset in the file; a missing or unreadable file is no offset
    /// (tests write it whole, by rename).
    fn offset_ms(&self) -> i64 {
        std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Clock for FileOffsetClock {
    fn now_ms(&self) -> i64 {
        SystemClock.now_ms().saturating_add(self.offset_ms())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_moves_the_clock_forward() {
        let dir = tempfile::tempdir().unwrap();
        let clock = FileOffsetClock::new(dir.path().join("offset"));
        let before = SystemClock.now_ms();
        assert!(
            (before..before + 60_000).contains(&clock.now_ms()),
            "no file: the wall clock"
        );
        std::fs::write(dir.path().join("offset"), "3600000\n").unwrap();
        assert!(clock.now_ms() >= before + 3_600_000);
    }
}
