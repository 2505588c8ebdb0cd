//! The payload filter language: any JSON either fails with an error or yields a filter within
//! the limits whose stored JSON reads back to the same filter, and evaluating it against an
//! event's document (the input itself, and a message event's) never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use webhook_core::payload_filter::{PayloadFilter, MAX_BYTES};

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let Ok(f) = PayloadFilter::parse(&value) {
        assert!(f.json().len() <= MAX_BYTES);
        let again = PayloadFilter::from_stored(f.json()).expect("the stored form reads back");
        assert_eq!(again, f);
        assert_eq!(again.to_value(), f.to_value());
        let message = json!({"event": "/orgId/o/department/d/message?direction=inbound",
            "messageInfo": {"status": "RECEIVED", "lastUpdated": 1},
            "message": {"to": ["+1", "+2"], "text": "hi", "owner": null, "media": []}});
        assert_eq!(f.matches(&message), again.matches(&message));
        let _ = f.matches(&value);
    }
});
