//! `Retry-After` from a callback's response: delay-seconds or an HTTP date; never panics
//! and never asks for more than a week.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use webhook_core::delivery::decide::parse_retry_after;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(d) = parse_retry_after(value, 1_700_000_000_000) {
        assert!(d <= Duration::from_secs(7 * 86_400), "{value:?} -> {d:?}");
    }
});
