//! A callback receiver for delivery tests: answers the handshake, records
//! every notification with its headers, and answers POSTs from a script.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::HeaderMap;
use http_body_util::BodyExt;
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("notification body is JSON")
    }
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap())
            .unwrap_or("")
    }
}

#[derive(Default)]
struct Inner {
    received: Mutex<Vec<Received>>,
    /// Answers for the next POSTs: (status, Retry-After); then 200.
    script: Mutex<VecDeque<(u16, Option<String>)>>,
    delay: Mutex<Duration>,
}

#[derive(Clone)]
pub struct Inbox {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
}

impl Inbox {
    pub async fn start() -> Inbox {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let inner = Arc::new(Inner::default());
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(inner.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Inbox { addr, inner }
    }

    pub fn uri(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The next POSTs answer these statuses (with an optional Retry-After).
    pub fn script(&self, answers: &[(u16, Option<&str>)]) {
        let mut s = self.inner.script.lock().unwrap();
        s.extend(answers.iter().map(|(c, r)| (*c, r.map(str::to_owned))));
    }

    /// Every POST waits this long before answering.
    pub fn slow(&self, delay: Duration) {
        *self.inner.delay.lock().unwrap() = delay;
    }

    pub fn received(&self) -> Vec<Received> {
        self.inner.received.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.inner.received.lock().unwrap().len()
    }

    /// Waits until at least `n` notifications arrived (or fails after `limit`).
    pub async fn wait_for(&self, n: usize, limit: Duration) -> Vec<Received> {
        let start = Instant::now();
        loop {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            assert!(
                start.elapsed() < limit,
                "only {} of {n} notifications arrived within {limit:?}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn answer(State(inner): State<Arc<Inner>>, request: Request) -> Response<Body> {
    let (parts, body) = request.into_parts();
    if parts.method == http::Method::GET {
        let mut r = Response::builder().status(200);
        if let Some(t) = parts.headers.get("validation-token") {
            r = r.header("validation-token", t.clone());
        }
        return r.body(Body::empty()).unwrap();
    }
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes().to_vec())
        .unwrap_or_default();
    let delay = *inner.delay.lock().unwrap();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    inner.received.lock().unwrap().push(Received {
        headers: parts.headers,
        body,
        at: Instant::now(),
    });
    let (status, retry_after) = inner
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or((200, None));
    let mut r = Response::builder().status(status);
    if let Some(ra) = retry_after {
        r = r.header("retry-after", ra);
    }
    r.body(Body::empty()).unwrap()
}

impl Inbox {
    /// Waits until `n` distinct `webhook-id`s arrived; returns everything received.
    pub async fn wait_for_unique(&self, n: usize, limit: Duration) -> Vec<Received> {
        let start = Instant::now();
        loop {
            let got = self.received();
            let unique: std::collections::HashSet<&str> =
                got.iter().map(|r| r.header("webhook-id")).collect();
            if unique.len() >= n {
                return got;
            }
            assert!(
                start.elapsed() < limit,
                "only {} of {n} distinct notifications arrived within {limit:?}",
                unique.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
