//! The callback receiver: answers the validation handshake and records the
//! arrival time of every notification by its `webhook-id`. Notifications to
//! a path under `/hang/` are held for [`HANG`] and not recorded: a callback
//! that accepts the request and never answers in time. Notifications to a
//! path under `/slow/` are answered after [`SLOW`], then recorded: a
//! healthy but slow callback (the cost suite's backlog).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use webhooks_receiver::{Answer, Arrival, Callback};

/// How long a notification to `/hang/...` waits for its answer: longer than
/// any delivery timeout the benchmark sets, so the service gives up first.
pub const HANG: Duration = Duration::from_secs(60);

/// How long a notification to `/slow/...` waits for its `200`.
pub const SLOW: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Inner {
    arrivals: Mutex<Vec<(String, Instant)>>,
    /// Notifications that reached a `/hang/` path.
    hung: AtomicU64,
}

impl Callback for Inner {
    async fn notification(&self, arrival: Arrival) -> Answer {
        if arrival.path.starts_with("/hang/") {
            self.hung.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(HANG).await;
            return Answer::ok();
        }
        if arrival.path.starts_with("/slow/") {
            tokio::time::sleep(SLOW).await;
        }
        if let Some(id) = arrival.id() {
            let mut arrivals = self.arrivals.lock().expect("not poisoned");
            arrivals.push((id.to_owned(), arrival.at));
        }
        Answer::ok()
    }
}

#[derive(Clone)]
pub struct Receiver {
    inner: Arc<Inner>,
    server: webhooks_receiver::Receiver,
}

impl Receiver {
    pub async fn start() -> Result<Receiver, String> {
        let inner = Arc::new(Inner::default());
        let server = webhooks_receiver::Receiver::start(inner.clone())
            .await
            .map_err(|e| format!("receiver: {e}"))?;
        Ok(Receiver { inner, server })
    }

    pub fn uri(&self, path: &str) -> String {
        self.server.uri(path)
    }

    /// Notifications received since the last [`Receiver::take`].
    pub fn count(&self) -> u64 {
        self.inner.arrivals.lock().expect("not poisoned").len() as u64
    }

    /// Distinct notifications (by `webhook-id`) received since the last
    /// [`Receiver::take`]: a redelivery of the same one counts once.
    pub fn distinct(&self) -> u64 {
        let arrivals = self.inner.arrivals.lock().expect("not poisoned");
        let ids: std::collections::HashSet<&str> =
            arrivals.iter().map(|(id, _)| id.as_str()).collect();
        ids.len() as u64
    }

    /// Notifications that reached a `/hang/` path so far (never taken).
    pub fn hung(&self) -> u64 {
        self.inner.hung.load(Ordering::Relaxed)
    }

    /// Takes the arrivals recorded so far: (webhook-id, when).
    pub fn take(&self) -> Vec<(String, Instant)> {
        std::mem::take(&mut *self.inner.arrivals.lock().expect("not poisoned"))
    }
}
