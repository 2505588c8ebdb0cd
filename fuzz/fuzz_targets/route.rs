//! Routing of request paths (percent-decoded ids): never panics; ids are bounded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webhook_core::routes::Route;

fuzz_target!(|data: &[u8]| {
    let Ok(path) = std::str::from_utf8(data) else {
        return;
    };
    for method in [
        http::Method::GET,
        http::Method::POST,
        http::Method::DELETE,
        http::Method::PUT,
    ] {
        match Route::resolve(&method, path) {
            Ok(Route::GetSubscription(id))
            | Ok(Route::DeleteSubscription(id))
            | Ok(Route::GetSubscriptionSecret(id))
            | Ok(Route::GetMessage(id)) => {
                assert!(!id.is_empty() && id.chars().count() <= 256)
            }
            Ok(_) => {}
            Err(e) => assert!(e.status.is_client_error() && e.detail.len() < 512),
        }
    }
});
