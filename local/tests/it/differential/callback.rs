//! The callbacks of one runtime: a real receiver on loopback whose answer to
//! each attempt is the script's for that notification and attempt (so the
//! runtimes, whatever order their calls take, meet the same callback), and
//! which records every arrival.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use webhooks_receiver::{Answer as Reply, Arrival, Callback};

use super::model::Script;
use super::plan::Answer;

/// How long a slow answer takes: past the delivery timeout the runtimes
/// are given (`runtimes.rs`, `WEBHOOKS_DELIVERY_TIMEOUT_MS`).
pub const SLOW: Duration = Duration::from_millis(1_500);

/// One notification as it arrived.
#[derive(Clone, Debug)]
pub struct Arrived {
    pub slot: usize,
    pub event: u32,
    /// Its `webhook-id`.
    pub uuid: String,
    /// Its custom header's value ([`super::plan::HEADER`]), if it had one.
    pub header: Option<String>,
    /// The receiver's wall clock, epoch ms.
    pub at_ms: i64,
    /// The schemes of its `webhook-signature`, in order (`v1a v1`).
    pub signatures: String,
}

#[derive(Default)]
struct Inner {
    script: Script,
    arrived: Mutex<Vec<Arrived>>,
}

pub struct Callbacks {
    inner: Arc<Inner>,
    server: webhooks_receiver::Receiver,
}

impl Callbacks {
    pub async fn start(script: Script) -> Callbacks {
        let inner = Arc::new(Inner {
            script,
            arrived: Mutex::default(),
        });
        let server = webhooks_receiver::Receiver::start(inner.clone())
            .await
            .expect("a receiver on loopback");
        Callbacks { inner, server }
    }

    /// The callback uri of `slot`.
    pub fn uri(&self, slot: usize) -> String {
        self.server.uri(&format!("/s{slot}"))
    }

    pub fn arrived(&self) -> Vec<Arrived> {
        self.inner.arrived.lock().unwrap().clone()
    }

    /// Arrivals by (slot, event).
    pub fn counts(&self) -> BTreeMap<(usize, u32), u32> {
        let mut counts = BTreeMap::new();
        for a in self.arrived() {
            *counts.entry((a.slot, a.event)).or_default() += 1;
        }
        counts
    }
}

impl Callback for Inner {
    async fn notification(&self, arrival: Arrival) -> Reply {
        let slot = arrival
            .path
            .strip_prefix("/s")
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("a notification to an unknown path {}", arrival.path));
        let body: serde_json::Value =
            serde_json::from_slice(&arrival.body).expect("a JSON notification");
        let event = body["messageInfo"]["messageId"]
            .as_str()
            .and_then(|m| m.strip_prefix('e'))
            .and_then(|m| m.parse().ok())
            .unwrap_or_else(|| panic!("a notification of an unknown message: {body}"));
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let attempt = {
            let mut arrived = self.arrived.lock().unwrap();
            let attempt = arrived
                .iter()
                .filter(|a| a.slot == slot && a.event == event)
                .count();
            arrived.push(Arrived {
                slot,
                event,
                uuid: arrival.header("webhook-id").to_owned(),
                header: arrival
                    .headers
                    .get(super::plan::HEADER)
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
                at_ms,
                signatures: arrival
                    .header("webhook-signature")
                    .split(' ')
                    .map(|s| s.split(',').next().unwrap_or(""))
                    .collect::<Vec<_>>()
                    .join(" "),
            });
            attempt
        };
        let answer = self
            .script
            .get(&(slot, event))
            .and_then(|s| s.get(attempt))
            .copied()
            .unwrap_or(Answer::Ok);
        match answer {
            Answer::Ok => Reply::ok(),
            Answer::Fail => Reply::status(500),
            Answer::Pause(status) => Reply::status(status).with_retry_after("1"),
            Answer::Gone => Reply::status(410),
            Answer::Slow => {
                tokio::time::sleep(SLOW).await;
                Reply::ok()
            }
        }
    }
}
