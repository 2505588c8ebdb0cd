//! W3C Trace Context (`traceparent`) from an API request, through the
//! events and delivery queues, to the callback's POST; and spans, which
//! [`otlp`] exports when `OTEL_EXPORTER_OTLP_ENDPOINT` says so
//! (feature `otlp`, `webhooks-local`). Without an exporter a span is two
//! ids and nothing else: the context still travels, so a receiver can join
//! the trace and the history shows its `traceId`.
//!
//! Spans: `request` (an API request, a child of the caller's `traceparent`
//! or a new trace), `ingest` (an event's fan-out and commit), `delivery
//! attempt` (one [`crate::delivery::deliver`]; the callback's POST carries
//! its context).

use std::fmt::Write as _;

#[cfg(feature = "otlp")]
pub mod otlp;

/// A `traceparent` header's ids and sampled flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace's id: 16 random bytes, shared by every span of the trace.
    pub trace_id: [u8; 16],
    /// The parent span's id: 8 bytes.
    pub span_id: [u8; 8],
    /// The `sampled` flag: the trace is recorded.
    pub sampled: bool,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let bytes = s.as_bytes();
    if bytes.len() != 2 * N || !bytes.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl TraceParent {
    /// Parses a `traceparent` header (W3C Trace Context level 1): version
    /// `00` exactly, or a later version's first four fields; all-zero ids
    /// and version `ff` are invalid.
    pub fn parse(header: &str) -> Option<Self> {
        let header = header.trim();
        let mut parts = header.splitn(5, '-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let rest = parts.next();
        let version = unhex::<1>(version)?[0];
        if version == 0xff || (version == 0 && rest.is_some()) {
            return None;
        }
        let flags = unhex::<1>(flags.get(..2)?)?[0];
        let (trace_id, span_id) = (unhex::<16>(trace)?, unhex::<8>(span)?);
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceParent {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// From X-Ray's `AWSTraceHeader` (`Root=1-<8 hex>-<24 hex>;Parent=<16 hex>;Sampled=1`).
    pub fn from_xray(header: &str) -> Option<Self> {
        let (mut root, mut parent, mut sampled) = (None, None, false);
        for field in header.split(';') {
            match field.trim().split_once('=')? {
                ("Root", v) => root = v.strip_prefix("1-").map(|v| v.replace('-', "")),
                ("Parent", v) => parent = unhex::<8>(&v.to_ascii_lowercase()),
                ("Sampled", v) => sampled = v == "1",
                _ => {}
            }
        }
        Some(TraceParent {
            trace_id: unhex::<16>(&root?.to_ascii_lowercase())?,
            span_id: parent?,
            sampled,
        })
    }

    /// The `traceparent` header value.
    pub fn header(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            hex(&self.trace_id),
            hex(&self.span_id),
            u8::from(self.sampled)
        )
    }

    /// The trace id, 32 lowercase hex digits.
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }

    /// A new trace (sampled).
    pub fn root() -> Self {
        let ids = crate::secret::random_bytes::<24>();
        let mut trace_id = [0u8; 16];
        trace_id.copy_from_slice(&ids[..16]);
        TraceParent {
            trace_id,
            span_id: new_span_id(&ids[16..]),
            sampled: true,
        }
    }

    /// A new span of the same trace.
    pub fn child(&self) -> Self {
        TraceParent {
            span_id: new_span_id(&crate::secret::random_bytes::<8>()),
            ..*self
        }
    }
}

fn new_span_id(bytes: &[u8]) -> [u8; 8] {
    let mut id = [0u8; 8];
    id.copy_from_slice(bytes);
    if id == [0; 8] {
        id[7] = 1;
    }
    id
}

tokio::task_local! {
    static CURRENT: TraceParent;
}

/// Runs `f` with `ctx` as the current trace context (what [`current`] tells).
pub async fn scope<F: std::future::Future>(ctx: TraceParent, f: F) -> F::Output {
    CURRENT.scope(ctx, f).await
}

/// The current trace context, inside [`scope`].
pub fn current() -> Option<TraceParent> {
    CURRENT.try_with(|c| *c).ok()
}

/// What a span is, for the exporter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Serves a request (an API call).
    Server,
    /// Work inside the process (an ingestion started by a request).
    Internal,
    /// Handles a queue message (an ingestion or a delivery attempt).
    Consumer,
    /// Calls another service.
    Client,
}

/// The span of delivery attempt number `attempt` of a job: a child of the
/// ingestion's context the job carries, its `traceparent` (a new trace
/// without one).
pub fn attempt_span(traceparent: Option<&str>, attempt: u32) -> Span {
    let parent = traceparent.and_then(TraceParent::parse);
    let mut span = start("delivery attempt", Kind::Consumer, parent);
    span.set("webhooks.attempt", i64::from(attempt));
    span
}

/// The span of an API request. A read (GET) is recorded only when its caller
/// sent a sampled `traceparent` or `OTEL_TRACES_SAMPLER` is set: reads cause
/// no notification and are most of the traffic, and exporting a span for
/// each costs a get about 12 % of its instructions
/// (docs/performance-history.md#metrics-and-traces-on-against-off-issue-23).
/// Every other request is recorded as the sampler says (by default, all).
pub fn request_span(parent: Option<TraceParent>, read: bool) -> Span {
    #[cfg(feature = "otlp")]
    if read && !parent.is_some_and(|p| p.sampled) && !otlp::samples_unasked_reads() {
        return unrecorded(parent);
    }
    let _ = read;
    start("request", Kind::Server, parent)
}

/// A span that is not recorded: a context and nothing else.
#[cfg(feature = "otlp")]
fn unrecorded(parent: Option<TraceParent>) -> Span {
    let ctx = parent.map_or_else(TraceParent::root, |p| p.child());
    Span {
        ctx: TraceParent {
            sampled: false,
            ..ctx
        },
        live: None,
    }
}

/// A span: its context and, when exporting, the live span.
pub struct Span {
    ctx: TraceParent,
    #[cfg(feature = "otlp")]
    live: Option<otlp::Live>,
}

/// Starts a span, a child of `parent` (a new trace without one).
pub fn start(name: &'static str, kind: Kind, parent: Option<TraceParent>) -> Span {
    #[cfg(feature = "otlp")]
    if let Some(live) = otlp::start(name, kind, parent) {
        return Span {
            ctx: live.context(),
            live: Some(live),
        };
    }
    let _ = (name, kind);
    Span {
        ctx: parent.map_or_else(TraceParent::root, |p| p.child()),
        #[cfg(feature = "otlp")]
        live: None,
    }
}

impl Span {
    /// The span's context, to pass on as a `traceparent`.
    pub fn context(&self) -> TraceParent {
        self.ctx
    }

    /// A bounded attribute (a label from a fixed set, a status, a count).
    pub fn set(&mut self, key: &'static str, value: impl Into<AttrValue>) {
        #[cfg(feature = "otlp")]
        if let Some(live) = &mut self.live {
            live.set(key, value.into());
        }
        #[cfg(not(feature = "otlp"))]
        let _ = (key, value.into());
    }

    /// Marks the span failed.
    pub fn error(&mut self, description: &'static str) {
        #[cfg(feature = "otlp")]
        if let Some(live) = &mut self.live {
            live.error(description);
        }
        #[cfg(not(feature = "otlp"))]
        let _ = description;
    }
}

/// An attribute's value.
#[derive(Debug, Clone)]
pub enum AttrValue {
    /// Text.
    Str(&'static str),
    /// An integer.
    Int(i64),
}

impl From<&'static str> for AttrValue {
    fn from(s: &'static str) -> Self {
        AttrValue::Str(s)
    }
}

impl From<i64> for AttrValue {
    fn from(n: i64) -> Self {
        AttrValue::Int(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_rejects_the_invalid() {
        let h = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let t = TraceParent::parse(h).unwrap();
        assert_eq!(t.header(), h);
        assert_eq!(t.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert!(t.sampled);
        assert_eq!(t.child().trace_id, t.trace_id);
        assert_ne!(t.child().span_id, t.span_id);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
        let future = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra";
        assert!(!TraceParent::parse(future).unwrap().sampled);
        let x = TraceParent::from_xray(
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
        )
        .unwrap();
        assert_eq!(x.trace_id_hex(), "5759e988bd862e3fe1be46a994272793");
        assert_eq!(
            x.header(),
            "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
        );
    }
}
