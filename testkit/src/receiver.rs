//! A real HTTP callback receiver on loopback: answers the validation
//! handshake as told, records every notification with its headers, and
//! answers POSTs from a script (status and `Retry-After`), then 200.

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::HeaderMap;
use serde_json::Value;
use webhooks_receiver::{Answer, Arrival, Callback};

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
    /// When it was recorded: after the body and any scripted delay.
    pub at: Instant,
    /// When the request arrived, before its body was read: what a
    /// receiver's rate counter sees.
    pub arrived: Instant,
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
    /// The headers of every handshake, in arrival order.
    handshakes: Mutex<Vec<HeaderMap>>,
    /// The `webhook-id` of every notification as it arrives, before the
    /// delay: what a receiver that acts before answering has seen.
    arrived: Mutex<Vec<String>>,
    /// Answers for the next POSTs: (status, Retry-After); then 200.
    script: Mutex<VecDeque<(u16, Option<String>)>>,
    /// Why each notification that is not one of the event catalogue is not
    /// ([`crate::catalogue::check`]): reading what was received fails the test.
    mismatches: Mutex<Vec<String>>,
    /// When set, every POST answers this status and body (a broken receiver).
    broken: Mutex<Option<(u16, String)>>,
    delay: Mutex<Duration>,
    /// While true, POSTs that arrived wait (before the delay) until it is false.
    held: tokio::sync::watch::Sender<bool>,
}

/// The receiver; dropping the last clone stops it.
#[derive(Clone)]
pub struct Receiver {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    _server: webhooks_receiver::Receiver,
}

impl Receiver {
    pub async fn start(handshake: Handshake) -> Receiver {
        let inner = Arc::new(Inner {
            handshake,
            hits: AtomicUsize::new(0),
            received: Mutex::default(),
            handshakes: Mutex::default(),
            arrived: Mutex::default(),
            script: Mutex::default(),
            broken: Mutex::default(),
            mismatches: Mutex::default(),
            delay: Mutex::default(),
            held: tokio::sync::watch::Sender::new(false),
        });
        let server = webhooks_receiver::Receiver::start(inner.clone())
            .await
            .unwrap();
        Receiver {
            addr: server.addr(),
            inner,
            _server: server,
        }
    }

    pub fn uri(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The headers of each handshake so far, in arrival order.
    pub fn handshakes(&self) -> Vec<HeaderMap> {
        self.inner.handshakes.lock().unwrap().clone()
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

    /// The POSTs that arrive from now on wait, counted as arrived but not
    /// answered, until [`Receiver::release`]: a callback that keeps the
    /// sender's calls in flight for as long as the test needs.
    pub fn hold(&self) {
        self.inner.held.send_replace(true);
    }

    /// The held POSTs go on (their delay, then their answer).
    pub fn release(&self) {
        self.inner.held.send_replace(false);
    }

    /// The notifications (POSTs) received so far. Panics when one was not
    /// a notification of the event catalogue: the catalogue cannot drift.
    pub fn received(&self) -> Vec<Received> {
        self.assert_catalogued();
        self.inner.received.lock().unwrap().clone()
    }

    /// Panics naming every body received that does not match its kind's
    /// schema in the event catalogue.
    pub fn assert_catalogued(&self) {
        let mismatches = self.inner.mismatches.lock().unwrap();
        assert!(
            mismatches.is_empty(),
            "{} notification(s) off the event catalogue:\n{}",
            mismatches.len(),
            mismatches.join("\n")
        );
    }

    /// The `webhook-id`s of the notifications that arrived so far, answered
    /// or not (a sender that hangs up mid-call still delivered it).
    pub fn arrived(&self) -> Vec<String> {
        self.inner.arrived.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.assert_catalogued();
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

/// A test that never reads what it received still fails on a body off the
/// catalogue, when its receiver goes.
impl Drop for Receiver {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.assert_catalogued();
        }
    }
}

impl Callback for Inner {
    async fn handshake(&self, arrival: Arrival) -> Answer {
        self.hits.fetch_add(1, Ordering::SeqCst);
        self.handshakes
            .lock()
            .unwrap()
            .push(arrival.headers.clone());
        match (self.handshake, arrival.token()) {
            (Handshake::Echo, Some(t)) => Answer::echo(t),
            (Handshake::WrongToken, Some(_)) => {
                Answer::ok().with_token(http::HeaderValue::from_static("not-the-token"))
            }
            (Handshake::Status(code), _) => Answer::status(code),
            (Handshake::Hang, _) => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Answer::ok()
            }
            _ => Answer::ok(),
        }
    }

    async fn notification(&self, arrival: Arrival) -> Answer {
        self.hits.fetch_add(1, Ordering::SeqCst);
        if let Some(id) = arrival.headers.get("webhook-id") {
            let id = String::from_utf8_lossy(id.as_bytes()).into_owned();
            self.arrived.lock().unwrap().push(id);
        }
        let _ = self.held.subscribe().wait_for(|held| !held).await;
        let delay = *self.delay.lock().unwrap();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if let Err(e) = crate::catalogue::check(&arrival.body) {
            self.mismatches.lock().unwrap().push(e);
        }
        self.received.lock().unwrap().push(Received {
            headers: arrival.headers,
            body: arrival.body.to_vec(),
            at: Instant::now(),
            arrived: arrival.at,
        });
        if let Some((status, body)) = self.broken.lock().unwrap().clone() {
            return Answer::status(status).with_body("text/html", body);
        }
        let (status, retry_after) = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or((200, None));
        match retry_after {
            Some(ra) => Answer::status(status).with_retry_after(&ra),
            None => Answer::status(status),
        }
    }
}
