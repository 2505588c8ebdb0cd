//! `page`/`size`/`sort` query parsing and page arithmetic: never panics, never overflows,
//! and what it accepts is within bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webhook_core::page::{PageRequest, MAX_SIZE};
use webhook_core::api::subscriptions::SORTABLE;

fuzz_target!(|data: &[u8]| {
    let Ok(query) = std::str::from_utf8(data) else {
        return;
    };
    match PageRequest::from_query(Some(query), SORTABLE) {
        Ok(page) => {
            assert!((1..=MAX_SIZE).contains(&page.size));
            for (i, o) in page.sort.iter().enumerate() {
                assert!(SORTABLE.contains(&o.property));
                assert!(page.sort[..i].iter().all(|p| p.property != o.property));
            }
            let items: Vec<u32> = (0..50).collect();
            let out = page.apply(items, &[], |a, b, _, _| a.cmp(b));
            assert!(out.content.len() as u64 <= page.size);
            assert_eq!(out.total_elements, 50);
        }
        Err(e) => {
            assert_eq!(e.code, "VALIDATION_FAILED");
            assert!(e.errors.len() <= 3, "one error per parameter");
        }
    }
});
