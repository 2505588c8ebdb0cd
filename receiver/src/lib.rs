//! A webhook callback receiver on a TCP listener: the one behind
//! `webhooks-local listen`, the benchmarks' receiver and the tests'
//! (`testkit`). It does what every receiver of the service's callbacks
//! does: answer the validation handshake (a `GET`, by default echoing its
//! `validation-token`), read each notification whole, note when it
//! arrived, and send the answer its [`Callback`] gives. What a receiver
//! does with a notification (record it, print it, verify its signature,
//! fail on purpose, hang) is its [`Callback`]'s.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use bytes::Bytes;
use http::header::{HeaderName, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode};
use http_body_util::BodyExt;
use tokio::net::TcpListener;

/// The handshake's header: the token a callback proves itself by echoing.
pub const VALIDATION_TOKEN: &str = "validation-token";

/// One request as it arrived: a handshake (`GET`) or a notification.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// Its method.
    pub method: Method,
    /// Its path (the callback's own, e.g. `/hook`).
    pub path: String,
    /// Its headers (`webhook-id`, `webhook-signature`, ...).
    pub headers: HeaderMap,
    /// Its body, read whole.
    pub body: Bytes,
    /// When it arrived, before its body was read.
    pub at: Instant,
}

impl Arrival {
    /// A header's value as text (empty when absent or not text).
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The notification's `webhook-id`, if it has one.
    pub fn id(&self) -> Option<&str> {
        self.headers.get("webhook-id").and_then(|v| v.to_str().ok())
    }

    /// The handshake's `validation-token`, if it carries one.
    pub fn token(&self) -> Option<&HeaderValue> {
        self.headers.get(VALIDATION_TOKEN)
    }
}

/// What a receiver answers: a status, headers and a body.
#[derive(Debug, Clone)]
pub struct Answer {
    status: StatusCode,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Bytes,
}

impl Answer {
    /// `200`, nothing else.
    pub fn ok() -> Self {
        Self::status(200)
    }

    /// This status, nothing else (an invalid code is a `500`).
    pub fn status(status: u16) -> Self {
        Answer {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    /// `200` echoing `token` in `validation-token`: a handshake passed.
    pub fn echo(token: &HeaderValue) -> Self {
        Self::ok().with_token(token.clone())
    }

    /// The same answer with `validation-token: token`.
    pub fn with_token(mut self, token: HeaderValue) -> Self {
        self.headers
            .push((HeaderName::from_static(VALIDATION_TOKEN), token));
        self
    }

    /// The same answer with `Retry-After` (not sent when not a valid header value).
    pub fn with_retry_after(mut self, value: &str) -> Self {
        if let Ok(value) = HeaderValue::from_str(value) {
            self.headers.push((RETRY_AFTER, value));
        }
        self
    }

    /// The same answer with `body` as `content_type`.
    pub fn with_body(mut self, content_type: &'static str, body: impl Into<Bytes>) -> Self {
        self.headers
            .push((CONTENT_TYPE, HeaderValue::from_static(content_type)));
        self.body = body.into();
        self
    }

    /// The answer's status.
    pub fn code(&self) -> u16 {
        self.status.as_u16()
    }

    fn into_response(self) -> Response<Body> {
        let mut response = Response::new(Body::from(self.body));
        *response.status_mut() = self.status;
        for (name, value) in self.headers {
            response.headers_mut().append(name, value);
        }
        response
    }
}

/// What a receiver does with what arrives.
pub trait Callback: Send + Sync + 'static {
    /// A `GET`: the validation handshake. By default `200`, echoing the
    /// `validation-token` when there is one.
    fn handshake(&self, arrival: Arrival) -> impl Future<Output = Answer> + Send {
        async move {
            match arrival.token() {
                Some(token) => Answer::echo(token),
                None => Answer::ok(),
            }
        }
    }

    /// Any other request: a notification, its body read whole.
    fn notification(&self, arrival: Arrival) -> impl Future<Output = Answer> + Send;
}

/// A receiver serving in the background; dropping the last clone stops it.
#[derive(Clone)]
pub struct Receiver {
    addr: SocketAddr,
    _task: Arc<AbortOnDrop>,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Receiver {
    /// Serves `callback` on a loopback port of its own, in the background.
    pub async fn start<C: Callback>(callback: Arc<C>) -> std::io::Result<Receiver> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = serve(listener, callback).await;
        });
        Ok(Receiver {
            addr,
            _task: Arc::new(AbortOnDrop(task)),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its URL for `path` (`http://127.0.0.1:<port><path>`).
    pub fn uri(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// Serves `callback` on `listener` until the listener fails.
pub async fn serve<C: Callback>(listener: TcpListener, callback: Arc<C>) -> std::io::Result<()> {
    let router = axum::Router::new()
        .fallback(receive::<C>)
        .with_state(callback);
    axum::serve(listener, router).await
}

async fn receive<C: Callback>(State(callback): State<Arc<C>>, request: Request) -> Response<Body> {
    let at = Instant::now();
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let arrival = Arrival {
        path: parts.uri.path().to_owned(),
        method: parts.method,
        headers: parts.headers,
        body,
        at,
    };
    let answer = if arrival.method == Method::GET {
        callback.handshake(arrival).await
    } else {
        callback.notification(arrival).await
    };
    answer.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    struct Refusing;

    impl Callback for Refusing {
        async fn notification(&self, arrival: Arrival) -> Answer {
            Answer::status(503)
                .with_retry_after("7")
                .with_body("text/plain", arrival.body)
        }
    }

    /// One request on a connection of its own, and the whole answer.
    async fn exchange(addr: SocketAddr, head: &str, body: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "{head}\r\nhost: {addr}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer.to_ascii_lowercase()
    }

    #[tokio::test]
    async fn handshakes_are_echoed_and_notifications_answered_as_told() {
        let receiver = Receiver::start(Arc::new(Refusing)).await.unwrap();
        let addr = receiver.addr();
        let handshake = exchange(addr, "GET /hook HTTP/1.1\r\nvalidation-token: abc", "").await;
        assert!(handshake.starts_with("http/1.1 200"), "{handshake}");
        assert!(handshake.contains("validation-token: abc"), "{handshake}");
        let posted = exchange(addr, "POST /hook HTTP/1.1", "hi").await;
        assert!(posted.starts_with("http/1.1 503"), "{posted}");
        assert!(posted.contains("retry-after: 7"), "{posted}");
        assert!(posted.ends_with("\r\n\r\nhi"), "{posted}");
    }
}
