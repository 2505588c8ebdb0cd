//! `webhooks-local listen`: a callback receiver for development. Answers the
//! validation handshake by echoing `validation-token` and prints every
//! notification it receives, one JSON line each, on stdout. With `--secret`
//! it verifies each notification's Standard Webhooks signature and timestamp
//! (with the `standardwebhooks` crate, independent of the sender's code),
//! says so on stderr, and answers 401 to a bad one.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
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
}

type Verifier = Option<Arc<standardwebhooks::Webhook>>;

pub fn run(args: ListenArgs) -> Result<(), String> {
    let verifier: Verifier = match &args.secret {
        Some(secret) => Some(Arc::new(
            standardwebhooks::Webhook::new(secret).map_err(|e| format!("--secret: {e}"))?,
        )),
        None => None,
    };
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let addr = SocketAddr::new(args.host, args.port);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        eprintln!("webhooks-local listen: receiving callbacks on http://{addr}/");
        let router = axum::Router::new().fallback(receive).with_state(verifier);
        axum::serve(listener, router)
            .await
            .map_err(|e| e.to_string())
    })
}

async fn receive(State(verifier): State<Verifier>, request: Request) -> Response<Body> {
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
    if let Some(verifier) = &verifier {
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
    respond(StatusCode::OK, None)
}

fn respond(status: StatusCode, token: Option<http::HeaderValue>) -> Response<Body> {
    let mut response = Response::builder().status(status);
    if let Some(token) = token {
        response = response.header("validation-token", token);
    }
    response.body(Body::empty()).expect("valid response")
}
