//! The event filter grammar: any input either fails with an error or yields a filter whose
//! canonical form parses back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webhook_core::filter::{self, EventFilter};

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(f) = EventFilter::parse(input) {
        assert!(filter::id("org", &f.organization_id).is_ok());
        assert!(filter::id("dep", &f.department_id).is_ok());
        let canonical = f.to_string();
        let again = EventFilter::parse(&canonical).expect("the canonical form parses");
        assert_eq!(again, f);
        assert_eq!(again.to_string(), canonical);
    }
});
