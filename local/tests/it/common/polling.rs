//! Waiting for a condition with a bound, never a fixed sleep.

use std::time::{Duration, Instant};

use http::StatusCode;
use serde_json::Value;

use super::Server;

/// How long [`wait_until`] polls before it fails.
pub const POLL_WAIT: Duration = Duration::from_secs(30);

/// GETs `path` as `org` until it answers 200 with a body `done` holds (or fails after
/// [`POLL_WAIT`], naming the last answer).
pub async fn wait_until(
    server: &Server,
    org: &str,
    path: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let (status, body) = server.get(path, org).await;
        if status == StatusCode::OK && done(&body) {
            return body;
        }
        assert!(
            started.elapsed() < POLL_WAIT,
            "{path} never got there: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
