//! A real HTTP callback receiver on loopback: answers the validation
//! handshake as told, records every notification with its headers, and
//! answers POSTs from a script (status and `Retry-After`), then 200.

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::HeaderMap;
use http_body_util::BodyExt;
use serde_json::Value;

/// How the receiver answers the validation handshake (`GET`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handshake {
    /// 200 with the token echoed: a valid callback.
    Echo,
    /// 200 with another token.
    WrongToken,
    /// 200 without the header.
    NoToken,
    /// This status, no token.
    Status(u16),
    /// Never answers.
    Hang,
}

/// One notification as it arrived.
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

struct Inner {
    handshake: Handshake,
    /// Every request, handshakes included.
    hits: AtomicUsize,
    received: Mutex<Vec<Received>>,
    /// The `webhook-id` of every notification as it arrives, before the
    /// delay: what a receiver that acts before answering has seen.
    arrived: Mutex<Vec<String>>,
    /// Answers for the next POSTs: (status, Retry-After); then 200.
    script: Mutex<VecDeque<(u16, Option<String>)>>,
    /// When set, every POST answers this status and body (a broken receiver).
    broken: Mutex<Option<(u16, String)>>,
    delay: Mutex<Duration>,
}

/// The receiver; dropping the last clone stops it.
#[derive(Clone)]
pub struct Receiver {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    _task: Arc<AbortOnDrop>,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Receiver {
    pub async fn start(handshake: Handshake) -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let inner = Arc::new(Inner {
            handshake,
            hits: AtomicUsize::new(0),
            received: Mutex::default(),
            arrived: Mutex::default(),
            script: Mutex::default(),
            broken: Mutex::default(),
            delay: Mutex::default(),
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(inner.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            addr,
            inner,
            _task: Arc::new(AbortOnDrop(task)),
        }
    }

    pub fn uri(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Requests so far, handshakes included.
    pub fn hits(&self) -> usize {
        self.inner.hits.load(Ordering::SeqCst)
    }

    /// The next POSTs answer these statuses (with an optional Retry-After).
    pub fn script(&self, answers: &[(u16, Option<&str>)]) {
        let mut s = self.inner.script.lock().unwrap();
        s.extend(answers.iter().map(|(c, r)| (*c, r.map(str::to_owned))));
    }

    /// Every POST answers `status` with `body` (as `text/html`) until [`Receiver::fix`].
    pub fn break_with(&self, status: u16, body: &str) {
        *self.inner.broken.lock().unwrap() = Some((status, body.to_owned()));
    }

    /// Back to answering 200 (or the script).
    pub fn fix(&self) {
        *self.inner.broken.lock().unwrap() = None;
    }

    /// Every POST waits this long before answering.
    pub fn slow(&self, delay: Duration) {
        *self.inner.delay.lock().unwrap() = delay;
    }

    /// The notifications (POSTs) received so far.
    pub fn received(&self) -> Vec<Received> {
        self.inner.received.lock().unwrap().clone()
    }

    /// The `webhook-id`s of the notifications that arrived so far, answered
    /// or not (a sender that hangs up mid-call still delivered it).
    pub fn arrived(&self) -> Vec<String> {
        self.inner.arrived.lock().unwrap().clone()
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

    /// Waits until `n` distinct `webhook-id`s arrived; returns everything received.
    pub async fn wait_for_unique(&self, n: usize, limit: Duration) -> Vec<Received> {
        let start = Instant::now();
        loop {
            let got = self.received();
            let unique: HashSet<&str> = got.iter().map(|r| r.header("webhook-id")).collect();
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

async fn answer(State(inner): State<Arc<Inner>>, request: Request) -> Response<Body> {
    inner.hits.fetch_add(1, Ordering::SeqCst);
    let (parts, body) = request.into_parts();
    if parts.method == http::Method::GET {
        return handshake(inner.handshake, parts.headers.get("validation-token")).await;
    }
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes().to_vec())
        .unwrap_or_default();
    if let Some(id) = parts.headers.get("webhook-id") {
        let id = String::from_utf8_lossy(id.as_bytes()).into_owned();
        inner.arrived.lock().unwrap().push(id);
    }
    let delay = *inner.delay.lock().unwrap();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    inner.received.lock().unwrap().push(Received {
        headers: parts.headers,
        body,
        at: Instant::now(),
    });
    if let Some((status, body)) = inner.broken.lock().unwrap().clone() {
        return Response::builder()
            .status(status)
            .header("content-type", "text/html")
            .body(Body::from(body))
            .unwrap();
    }
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

async fn handshake(mode: Handshake, token: Option<&http::HeaderValue>) -> Response<Body> {
    let ok = Response::builder().status(200);
    let response = match (mode, token) {
        (Handshake::Echo, Some(t)) => ok.header("validation-token", t.clone()),
        (Handshake::WrongToken, Some(_)) => ok.header("validation-token", "not-the-token"),
        (Handshake::Status(code), _) => Response::builder().status(code),
        (Handshake::Hang, _) => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            ok
        }
        _ => ok,
    };
    response.body(Body::empty()).unwrap()
}
