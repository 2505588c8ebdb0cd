//! The callback receiver: answers the validation handshake and records the
//! arrival time of every notification by its `webhook-id`. Notifications to
//! a path under `/hang/` are held for [`HANG`] and not recorded: a callback
//! that accepts the request and never answers in time.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;

/// How long a notification to `/hang/...` waits for its answer: longer than
/// any delivery timeout the benchmark sets, so the service gives up first.
pub const HANG: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Inner {
    arrivals: Mutex<Vec<(String, Instant)>>,
    /// Notifications that reached a `/hang/` path.
    hung: AtomicU64,
}

#[derive(Clone)]
pub struct Receiver {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
}

impl Receiver {
    pub async fn start() -> Result<Receiver, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("receiver: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let inner = Arc::new(Inner::default());
        let router = axum::Router::new()
            .fallback(answer)
            .with_state(inner.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Receiver { addr, inner })
    }

    pub fn uri(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Notifications received since the last [`Receiver::take`].
    pub fn count(&self) -> u64 {
        self.inner.arrivals.lock().expect("not poisoned").len() as u64
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

async fn answer(State(inner): State<Arc<Inner>>, request: Request) -> Response<Body> {
    let at = Instant::now();
    let (parts, body) = request.into_parts();
    let mut response = Response::builder().status(200);
    if parts.method == http::Method::GET {
        if let Some(token) = parts.headers.get("validation-token") {
            response = response.header("validation-token", token.clone());
        }
    } else {
        // Read the body so the connection is kept alive.
        let _ = axum::body::to_bytes(body, 1 << 20).await;
        if parts.uri.path().starts_with("/hang/") {
            inner.hung.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(HANG).await;
            return response.body(Body::empty()).expect("valid response");
        }
        if let Some(id) = parts
            .headers
            .get("webhook-id")
            .and_then(|v| v.to_str().ok())
        {
            inner
                .arrivals
                .lock()
                .expect("not poisoned")
                .push((id.to_owned(), at));
        }
    }
    response.body(Body::empty()).expect("valid response")
}
