//! `webhooks-local listen`: a callback receiver for development. Answers the
//! validation handshake by echoing `validation-token` and prints every
//! notification it receives, one JSON line each, on stdout. With `--secret`
//! it verifies each notification's Standard Webhooks signature and timestamp
//! (with the `standardwebhooks` crate, independent of the sender's code),
//! says so on stderr, and answers 401 to a bad one. With `--fail-first N`
//! it answers the first N notifications `500` (to see failed deliveries in
//! the history, and resend them).

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use clap::Args;
use http::StatusCode;
use http_body_util::BodyExt;

#[derive(Args)]
pub struct ListenArgs {
    /// Port to listen on.
    #[arg(long, default_value_t = 4000)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// The subscription's signing secret (`whsec_...`): verify every notification.
    #[arg(long, env = "WEBHOOKS_LISTEN_SECRET")]
    secret: Option<String>,
    /// Answer the first N notifications `500 Internal Server Error`.
    #[arg(long, default_value_t = 0)]
    fail_first: u64,
}

struct Listener {
    verifier: Option<standardwebhooks::Webhook>,
    /// Notifications still to answer 500.
    failures_left: AtomicU64,
}

pub fn run(args: ListenArgs) -> Result<(), String> {
    let verifier = match &args.secret {
        Some(secret) => {
            Some(standardwebhooks::Webhook::new(secret).map_err(|e| format!("--secret: {e}"))?)
        }
        None => None,
    };
    let listener_state = Arc::new(Listener {
        verifier,
        failures_left: AtomicU64::new(args.fail_first),
    });
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let addr = SocketAddr::new(args.host, args.port);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        eprintln!("webhooks-local listen: receiving callbacks on http://{addr}/");
        let router = axum::Router::new()
            .fallback(receive)
            .with_state(listener_state);
        axum::serve(listener, router)
            .await
            .map_err(|e| e.to_string())
    })
}

async fn receive(State(state): State<Arc<Listener>>, request: Request) -> Response<Body> {
    let (parts, body) = request.into_parts();
    if parts.method == http::Method::GET {
        if let Some(token) = parts.headers.get("validation-token") {
            eprintln!(
                "handshake: answered validation-token on {}",
                parts.uri.path()
            );
            return respond(StatusCode::OK, Some(token.clone()));
        }
    }
    let bytes = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let id = parts
        .headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_owned();
    if let Some(verifier) = &state.verifier {
        if let Err(e) = verifier.verify(&bytes, &parts.headers) {
            eprintln!("notification {id}: signature INVALID ({e}); answered 401");
            return respond(StatusCode::UNAUTHORIZED, None);
        }
        eprintln!("notification {id}: signature verified");
    }
    let line = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(json) => json.to_string(),
        Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    let fail = state
        .failures_left
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if fail {
        eprintln!("notification {id}: answered 500 (--fail-first)");
        return respond(StatusCode::INTERNAL_SERVER_ERROR, None);
    }
    respond(StatusCode::OK, None)
}

fn respond(status: StatusCode, token: Option<http::HeaderValue>) -> Response<Body> {
    let mut response = Response::builder().status(status);
    if let Some(token) = token {
        response = response.header("validation-token", token);
    }
    response.body(Body::empty()).expect("valid response")
}
