//! OTLP export of the spans of [`super`] (feature `otlp`,
//! `webhooks-local`), configured by the standard variables:
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`;
//! unset: nothing is exported and no span is built),
//! `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, the default and the only
//! one built in), `OTEL_SERVICE_NAME` (default `webhooks-local`),
//! `OTEL_TRACES_SAMPLER` and the batch processor's `OTEL_BSP_*`. Spans go
//! out through the workspace's reqwest client (rustls), no grpc.

use std::sync::OnceLock;

use opentelemetry::trace::{
    Span as _, SpanContext, SpanKind, Status, TraceContextExt, TraceFlags, TraceState, Tracer as _,
    TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};

use super::{AttrValue, Kind, TraceParent};

struct Exporting {
    provider: SdkTracerProvider,
    tracer: Tracer,
}

static EXPORTING: OnceLock<Exporting> = OnceLock::new();

/// Whether `OTEL_TRACES_SAMPLER` was set when exporting started (see
/// [`super::request_span`]).
static SAMPLER_SET: OnceLock<bool> = OnceLock::new();

/// Whether an API read its caller did not trace is recorded.
pub(super) fn samples_unasked_reads() -> bool {
    SAMPLER_SET.get().copied().unwrap_or(false)
}

/// The OTLP endpoint the environment names, if any.
pub fn endpoint_from_env() -> Option<String> {
    [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
}

/// Starts exporting when the environment says so; returns the endpoint.
/// Call inside the Tokio runtime that will carry the exports.
pub fn install_from_env() -> Result<Option<String>, String> {
    let Some(endpoint) = endpoint_from_env() else {
        return Ok(None);
    };
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL").unwrap_or_default();
    if !matches!(protocol.as_str(), "" | "http/protobuf") {
        return Err(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported: use http/protobuf"
        ));
    }
    use opentelemetry_otlp::WithHttpConfig;
    let client = Client {
        client: reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|e| format!("the OTLP client cannot be built: {e}"))?,
        runtime: tokio::runtime::Handle::current(),
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .build()
        .map_err(|e| format!("the OTLP exporter cannot be built: {e}"))?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").is_err() {
        resource = resource.with_service_name("webhooks-local");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("webhooks");
    let _ = SAMPLER_SET.set(std::env::var_os("OTEL_TRACES_SAMPLER").is_some());
    let _ = EXPORTING.set(Exporting { provider, tracer });
    Ok(Some(endpoint))
}

/// Exports what is still buffered (at shutdown).
pub fn shutdown() {
    if let Some(e) = EXPORTING.get() {
        let _ = e.provider.shutdown();
    }
}

/// A span being recorded (ended when dropped).
pub struct Live(opentelemetry_sdk::trace::Span);

pub(super) fn start(name: &'static str, kind: Kind, parent: Option<TraceParent>) -> Option<Live> {
    let e = EXPORTING.get()?;
    let cx = match parent {
        Some(p) => Context::new().with_remote_span_context(SpanContext::new(
            opentelemetry::trace::TraceId::from_bytes(p.trace_id),
            opentelemetry::trace::SpanId::from_bytes(p.span_id),
            if p.sampled {
                TraceFlags::SAMPLED
            } else {
                TraceFlags::default()
            },
            true,
            TraceState::default(),
        )),
        None => Context::new(),
    };
    let kind = match kind {
        Kind::Server => SpanKind::Server,
        Kind::Internal => SpanKind::Internal,
        Kind::Consumer => SpanKind::Consumer,
        Kind::Client => SpanKind::Client,
    };
    Some(Live(
        e.tracer
            .span_builder(name)
            .with_kind(kind)
            .start_with_context(&e.tracer, &cx),
    ))
}

impl Live {
    pub(super) fn context(&self) -> TraceParent {
        let sc = self.0.span_context();
        TraceParent {
            trace_id: sc.trace_id().to_bytes(),
            span_id: sc.span_id().to_bytes(),
            sampled: sc.is_sampled(),
        }
    }

    pub(super) fn set(&mut self, key: &'static str, value: AttrValue) {
        self.0.set_attribute(match value {
            AttrValue::Str(s) => KeyValue::new(key, s),
            AttrValue::Int(n) => KeyValue::new(key, n),
        });
    }

    pub(super) fn error(&mut self, description: &'static str) {
        self.0.set_status(Status::error(description));
    }
}

/// The exporter's HTTP client: the workspace's reqwest, each request run on
/// the server's Tokio runtime (the batch processor exports from a thread
/// of its own).
#[derive(Debug)]
struct Client {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Client {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let (parts, body) = request.into_parts();
        let call = self
            .client
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body);
        let answer = self
            .runtime
            .spawn(async move {
                let answer = call.send().await?;
                let (status, headers) = (answer.status(), answer.headers().clone());
                Ok::<_, reqwest::Error>((status, headers, answer.bytes().await?))
            })
            .await??;
        let (status, headers, body) = answer;
        let mut response = http::Response::builder().status(status).body(body)?;
        *response.headers_mut() = headers;
        Ok(response)
    }
}
