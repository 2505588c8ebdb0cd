//! `webhooks-local serve`: routes `/prod/...` to the same handlers the
//! Lambda functions run, on the backend `--backend` chooses, with delivery
//! workers on its queue.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use webhook_core::auth::jwt::{self, Verifier};
use webhook_core::auth::Authenticator;
use webhook_core::clock::Clock;
use webhook_core::console::{self, Console, ConsoleConfig};
use webhook_core::http::{error_response, payload_too_large, MAX_BODY};
use webhook_core::reminders::run_reminders;
use webhook_core::retention::run_purges;
use webhook_core::services::Services;
use webhook_core::telemetry::metrics;
use webhook_core::telemetry::trace::otlp;
use webhook_core::{Config, Profile};

use crate::credentials::Credentials;
use crate::shutdown;
use crate::workers;
use crate::ServeArgs;

struct Server {
    services: Services,
    auth: Authenticator,
    console: Console,
}

pub fn run(args: ServeArgs) -> Result<(), String> {
    init_logging();
    let mut config = Config::from_env(Profile::Local).map_err(|e| e.to_string())?;
    let generated = if config.api_keys.is_empty()
        || !(config.jwt.hs256_secret.is_some() || config.jwt.jwks_url.is_some())
    {
        Some(Credentials::load_or_create(&args.data_dir)?)
    } else {
        None
    };
    if let Some(creds) = &generated {
        if config.api_keys.is_empty() {
            config.api_keys.push(creds.api_key.clone());
        }
        if config.jwt.hs256_secret.is_none() && config.jwt.jwks_url.is_none() {
            config.jwt.hs256_secret = Some(creds.jwt_secret.clone());
        }
    }
    let console = Console::new(&ConsoleConfig::from_env().map_err(|e| e.to_string())?);
    let (concurrency, grace) = (config.delivery_concurrency, config.shutdown_grace);
    let auth = Authenticator::new(
        config.api_keys.clone(),
        Verifier::new(&config.jwt).with_jwks_min_refresh(config.jwks_min_refresh),
    );
    let banner = Banner {
        api_key: generated.as_ref().map(|c| c.api_key.clone()),
        token: config.jwt.hs256_secret.as_ref().map(|s| {
            jwt::mint_hs256(
                s,
                &config.jwt.org_claim,
                "org-1",
                &config.jwt.scopes.all(),
                std::time::Duration::from_secs(86_400),
            )
        }),
    };
    if args.metrics_addr.is_some() {
        metrics::install();
    }
    let runtime = crate::runtime::build().map_err(|e| e.to_string())?;
    // SQLite's connection threads give their memory back when idle, as the
    // runtime's workers do (`runtime.rs`).
    webhook_core::services::before_sleep(crate::memory::collect);
    let backend = crate::backend::choose(&args, &config)?;
    let clock: Arc<dyn Clock> = match &args.test_clock_file {
        Some(path) => {
            tracing::warn!(path = %path.display(), "test clock: time runs ahead by the file's milliseconds");
            Arc::new(crate::test_clock::FileOffsetClock::new(path.clone()))
        }
        None => webhook_core::clock::system(),
    };
    let services = runtime
        .block_on(Services::open(config, backend, clock))
        .map_err(|e| e.to_string())?;
    services.app.callbacks.warm_up();
    let stop = CancellationToken::new();
    let deliveries = TaskTracker::new();
    let workers = workers::run_workers(
        services.app.clone(),
        services.queue.clone(),
        services.outbox.clone(),
        concurrency,
        stop.clone(),
        deliveries.clone(),
    );
    // The ordered subscriptions' FIFO queue (AWS) has a loop of its own, so
    // a line's next message is leased as soon as its head is settled, not
    // after the standard queue's long poll; `deliveries` waits for its
    // deliveries too.
    let ordered_workers = services.ordered_queue.clone().map(|queue| {
        let tracker = TaskTracker::new();
        let waited = tracker.clone();
        let _runtime = runtime.enter();
        deliveries.spawn(async move { waited.wait().await });
        workers::run_workers(
            services.app.clone(),
            queue,
            services.outbox.clone(),
            concurrency,
            stop.clone(),
            tracker,
        )
    });
    let purges = run_purges(services.app.clone(), stop.clone().cancelled_owned());
    let reminders = run_reminders(
        services.app.clone(),
        services.outbox.clone(),
        stop.clone().cancelled_owned(),
    );
    let server = Arc::new(Server {
        services,
        auth,
        console,
    });
    let served = runtime.block_on(async move {
        // OTEL_EXPORTER_OTLP_ENDPOINT: spans exported; unset, nothing is.
        let traces = otlp::install_from_env()?;
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let signalled =
            shutdown::requested().map_err(|e| format!("cannot handle SIGTERM and SIGINT: {e}"))?;
        banner.print(addr);
        if let Some(metrics_addr) = args.metrics_addr {
            let listener = tokio::net::TcpListener::bind(metrics_addr)
                .await
                .map_err(|e| {
                    format!("cannot listen on {metrics_addr} (WEBHOOKS_METRICS_ADDR): {e}")
                })?;
            let at = listener.local_addr().map_err(|e| e.to_string())?;
            println!("Metrics (Prometheus):     http://{at}/metrics");
            let router = axum::Router::new()
                .route("/metrics", axum::routing::get(metrics_page))
                .with_state(server.clone());
            tokio::spawn(async move { axum::serve(listener, router).await });
        }
        if let Some(endpoint) = traces {
            println!("Traces (OTLP):            {endpoint}");
        }
        tokio::spawn(workers);
        if let Some(ordered_workers) = ordered_workers {
            tokio::spawn(ordered_workers);
        }
        tokio::spawn(purges);
        tokio::spawn(reminders);
        let router = axum::Router::new()
            .fallback(handle)
            .with_state(server.clone());
        let http =
            axum::serve(listener, router).with_graceful_shutdown(stop.clone().cancelled_owned());
        // axum's serve never fails: it ends once told to and its connections closed.
        let http = tokio::spawn(async move {
            let _ = http.await;
        });
        signalled.await;
        stop.cancel();
        shutdown::drain(grace, deliveries, http).await;
        Ok(())
    });
    otlp::shutdown(); // exports the spans still buffered
    served
}

struct Banner {
    api_key: Option<String>,
    token: Option<String>,
}

impl Banner {
    fn print(&self, addr: std::net::SocketAddr) {
        println!("webhooks-local listening on http://{addr}/prod");
        if let Some(key) = &self.api_key {
            println!("API key (x-api-key):      {key}");
        }
        if let Some(token) = &self.token {
            println!("Bearer token for org-1:   {token}");
            println!("More tokens:              webhooks-local token --org <ORG>");
        }
        println!("{}", self.console_line(addr));
    }

    /// The console's address; with the generated key and the token, a link
    /// that signs in at once. They ride in the fragment, which the browser
    /// never sends to a server (and the page removes from the address bar).
    fn console_line(&self, addr: std::net::SocketAddr) -> String {
        let page = format!("http://{addr}/prod{}", console::PATH);
        match (&self.api_key, &self.token) {
            (Some(key), Some(token)) => format!(
                "Console (signed in):      {page}#key={}&token={}",
                form_urlencoded(key),
                form_urlencoded(token)
            ),
            _ => format!("Console:                  {page}"),
        }
    }
}

/// A value for an `application/x-www-form-urlencoded` fragment.
fn form_urlencoded(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn handle(State(server): State<Arc<Server>>, request: Request) -> Response<Body> {
    if !metrics::is_installed() {
        return respond(&server, request).await;
    }
    let started = std::time::Instant::now();
    let path = request.uri().path();
    // The API's answers carry their route label; the rest is labelled here.
    let other = if console::rest_of_path(path).is_some() {
        "console"
    } else if openapi_path(path) {
        "openapi"
    } else {
        "unmatched"
    };
    let response = respond(&server, request).await;
    let route = response
        .extensions()
        .get::<webhook_core::http::RouteLabel>()
        .map_or(other, |l| l.0);
    metrics::http_request(route, response.status().as_u16(), started.elapsed());
    response
}

/// `GET /metrics` on `WEBHOOKS_METRICS_ADDR`: the gauges read now, then every family.
async fn metrics_page(State(server): State<Arc<Server>>) -> Response<Body> {
    let app = &server.services.app;
    metrics::breakers_open(app.breakers.open_count(app.now_ms()));
    match server.services.queue.backlog().await {
        Ok(Some(backlog)) => metrics::queue_backlog(backlog.due, backlog.oldest_due_age),
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "the queue's backlog cannot be read"),
    }
    Response::builder()
        .header(http::header::CONTENT_TYPE, metrics::CONTENT_TYPE)
        .body(Body::from(metrics::render().unwrap_or_default()))
        .expect("valid response")
}

/// 413, labelled with the route it was sent to (rare: resolved here).
fn too_large(parts: &http::request::Parts) -> Response<Body> {
    let mut response = error_response(&payload_too_large()).map(Body::from);
    let route = webhook_core::routes::label_of(&parts.method, parts.uri.path());
    response
        .extensions_mut()
        .insert(webhook_core::http::RouteLabel(route));
    response
}

async fn respond(server: &Server, request: Request) -> Response<Body> {
    let (parts, body) = request.into_parts();
    if let Some(rest) = console::rest_of_path(parts.uri.path()) {
        // The console's page and files: no API key, no token.
        return server
            .console
            .serve(&parts.method, rest, &parts.headers)
            .map(Body::from);
    }
    if let Some(response) = openapi_document(&parts) {
        return response;
    }
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = declared.filter(|n| *n > MAX_BODY as u64) {
        // Read (and drop) a moderately oversized body first, so the client sees the
        // 413 instead of a reset upload; a huge one is refused without reading.
        if n <= 1024 * 1024 {
            let _ = Limited::new(body, 1024 * 1024).collect().await;
        }
        return too_large(&parts);
    }
    let body: Bytes = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return too_large(&parts),
        Err(_) => Bytes::new(),
    };
    let request = http::Request::from_parts(parts, body);
    webhook_core::http::serve(&server.services, &server.auth, request)
        .await
        .map(Body::from)
}

/// The API's OpenAPI document, at `/prod/openapi.yaml`, without authentication.
const OPENAPI_YAML: &str = include_str!("../../openapi.yaml");

fn openapi_path(path: &str) -> bool {
    path == "/prod/openapi.yaml" || path == "/openapi.yaml"
}

fn openapi_document(parts: &http::request::Parts) -> Option<Response<Body>> {
    if !openapi_path(parts.uri.path()) {
        return None;
    }
    if parts.method != http::Method::GET {
        let e = webhook_core::ApiError::new(
            http::StatusCode::METHOD_NOT_ALLOWED,
            webhook_core::error::ErrorCode::MethodNotAllowed,
            format!("{} is not allowed here; allowed: GET", parts.method),
        )
        .with_header(http::header::ALLOW, "GET");
        return Some(error_response(&e).map(Body::from));
    }
    Some(
        Response::builder()
            .header(http::header::CONTENT_TYPE, "application/yaml")
            .body(Body::from(OPENAPI_YAML))
            .expect("valid response"),
    )
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("RUST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
