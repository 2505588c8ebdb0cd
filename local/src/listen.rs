//! `webhooks-local listen`: a callback receiver for development. Answers the
//! validation handshake by echoing `validation-token` and prints every
//! notification it receives, one JSON line each, on stdout.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};

use axum::body::Body;
use axum::extract::Request;
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
}

pub fn run(args: ListenArgs) -> Result<(), String> {
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let addr = SocketAddr::new(args.host, args.port);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        eprintln!("webhooks-local listen: receiving callbacks on http://{addr}/");
        axum::serve(listener, axum::Router::new().fallback(receive))
            .await
            .map_err(|e| e.to_string())
    })
}

async fn receive(request: Request) -> Response<Body> {
    let (parts, body) = request.into_parts();
    if parts.method == http::Method::GET {
        if let Some(token) = parts.headers.get("validation-token") {
            eprintln!(
                "handshake: answered validation-token on {}",
                parts.uri.path()
            );
            return Response::builder()
                .status(StatusCode::OK)
                .header("validation-token", token.clone())
                .body(Body::empty())
                .expect("valid response");
        }
    }
    let bytes = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let line = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(json) => json.to_string(),
        Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    Response::builder()
        .status(StatusCode::OK)
        .body(Body::empty())
        .expect("valid response")
}
