//! Normalization: a runtime's answers with what may differ between runs
//! (ids, times, secrets, expiry) mapped or left out, in the model's shape.
//! Where the runtimes may differ by the contract (docs/api.md, "Where the
//! runtimes differ"), this is the one place that knows it.

use std::collections::HashMap;

use serde_json::{json, Value};

/// Subscription ids in order of first appearance: `s0`, `s1`, ...
#[derive(Default)]
pub struct Labels(HashMap<String, usize>);

impl Labels {
    pub fn of(&mut self, id: &str) -> String {
        let next = self.0.len();
        format!("s{}", self.0.entry(id.to_owned()).or_insert(next))
    }
}

/// A subscription answer: its id mapped, the contract's fields; expiry,
/// times, secrets and the uri (the runtime's receiver) left out.
pub fn subscription(labels: &mut Labels, body: &Value) -> Value {
    json!({
        "id": labels.of(body["id"].as_str().expect("a subscription has an id")),
        "status": body["status"],
        "eventFilters": body["eventFilters"],
        "ordered": body["ordered"],
        "rateLimit": body["rateLimit"],
        "payloadFilter": body["payloadFilter"],
        "signatureScheme": body["signatureScheme"],
        "retrySchedule": body["retrySchedule"],
        "customHeaders": body["customHeaders"],
        "health": health(&body["health"]),
    })
}

/// The health the model keeps: the breaker's state (closed: the test
/// turns the breaker off, `runtimes::SETTINGS`), the streak and the last
/// failure's code and status. A pause (`pausedUntil`, when it is shown)
/// has ended once a sequence settles, so it is left out here.
fn health(health: &Value) -> Value {
    let last = &health["lastFailure"];
    json!({
        "state": health["state"],
        "consecutiveFailures": health["consecutiveFailures"],
        "lastFailure": if last.is_null() {
            Value::Null
        } else {
            json!({"code": last["code"], "httpStatus": last["httpStatus"]})
        },
    })
}

/// A notification's detail: its status, attempts and last outcome, and
/// each attempt's status, failing step and trigger (times and bodies left
/// out).
pub fn notification(detail: &Value) -> Value {
    let attempts = detail["attempts"].as_array().cloned().unwrap_or_default();
    let tried: Vec<Value> = attempts
        .iter()
        .map(|a| json!([a["httpStatus"], a["code"], a["trigger"]]))
        .collect();
    json!({
        "status": detail["status"],
        "attempts": attempts.len(),
        "lastHttpStatus": detail["lastHttpStatus"],
        "lastCode": detail["lastCode"],
        "tried": tried,
    })
}

/// An answer that is a problem: its status and code.
pub fn problem(status: u16, body: &Value) -> Value {
    json!({"status": status, "code": body["code"]})
}

/// The arrivals of one subscription's notifications, by receiver clock
/// (epoch ms), hold its rate limit. The rule (docs/api.md, "Behaviour": Rate limit):
/// starts are spaced so that at most `limit` arrive in any interval of one
/// second however it is cut, up to the requests' times on the way (here
/// loopback): any `limit + 1` arrivals span a second or more.
pub fn rate_kept(arrivals_ms: &[i64], limit: u32) -> bool {
    let mut sorted = arrivals_ms.to_vec();
    sorted.sort_unstable();
    let limit = limit as usize;
    sorted.windows(limit + 1).all(|w| w[limit] - w[0] >= 1000)
}

/// An ordered subscription's arrivals (event ids in arrival order) kept
/// acceptance order: every attempt of one notification before any of a
/// later one.
pub fn order_kept(events: &[u32]) -> bool {
    events.windows(2).all(|w| w[0] <= w[1])
}
