//! How big a test's load is. Every commit proves each behaviour at the smallest size that
//! proves it; `./scripts/test.sh --full` sets `WEBHOOKS_TEST_FULL=1` and the same tests
//! run at full size (floods of thousands, the 1,000-event kill tests).

/// The variable `./scripts/test.sh --full` sets.
pub const FULL: &str = "WEBHOOKS_TEST_FULL";

/// True in the full tier.
pub fn full() -> bool {
    std::env::var(FULL).is_ok_and(|v| v == "1")
}

/// `small` on every commit, `full` in the full tier.
pub fn scaled(small: usize, full_size: usize) -> usize {
    if full() {
        full_size
    } else {
        small
    }
}
