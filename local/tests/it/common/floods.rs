//! Floods of contact events, for the isolation and scheduling tests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Value};

use super::{contact, produce, Receiver, Server};

/// A `contact.created` event of `org`'s department `dep`.
pub fn contact_event(id: &str, org: &str) -> Value {
    json!({"eventId": id, "type": "contact.created", "organizationId": org, "departmentId": "dep",
           "occurredAt": 1_700_000_000_001i64, "contact": {"id": "contact-7"}})
}

/// Subscribes `receiver` to `org`'s contact events of department `dep`; its id.
pub async fn subscribe(server: &Server, org: &str, receiver: &Receiver) -> String {
    let (status, sub) = server
        .create(org, &receiver.uri("/hook"), &[&contact(org, "dep")])
        .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    sub["id"].as_str().unwrap().to_owned()
}

/// Posts `n` contact events of `org`, ids `<prefix>-<i>`, with 16 concurrent producers.
pub async fn flood(server: &Arc<Server>, org: &str, prefix: &str, n: usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let mut producers = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let (server, next, org, prefix) = (
            server.clone(),
            next.clone(),
            org.to_owned(),
            prefix.to_owned(),
        );
        producers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    return;
                }
                let event = contact_event(&format!("{prefix}-{i}"), &org);
                assert_eq!(produce(&server, &org, &event).await, StatusCode::ACCEPTED);
            }
        });
    }
    while let Some(done) = producers.join_next().await {
        done.unwrap();
    }
}
