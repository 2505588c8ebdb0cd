//! The event envelope (`POST /prod/events`, SQS EventsQueue): any bytes are parsed as the
//! HTTP adapter does; a validated event has valid ids and a filter that round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webhook_core::filter::{self, EventFilter};
use webhook_core::ingest::EventEnvelope;

fuzz_target!(|data: &[u8]| {
    let Ok(envelope) = serde_json::from_slice::<EventEnvelope>(data) else {
        return;
    };
    if let Ok(event) = envelope.validate(1_700_000_000_000) {
        assert!(filter::id("org", &event.organization_id).is_ok());
        assert!(filter::id("dep", &event.department_id).is_ok());
        assert!(!event.id.is_empty() && event.id.chars().count() <= 256);
        let f = event.filter().to_string();
        assert_eq!(EventFilter::parse(&f).unwrap().to_string(), f);
        if let Some(m) = &event.message {
            assert!(!m.id.is_empty() && m.to.len() <= 100);
        }
    }
});
