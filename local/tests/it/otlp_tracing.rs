//! W3C Trace Context end to end (issue 23): an event posted with a known
//! `traceparent`; the callback's POST carries the same trace id, the
//! notification's detail shows it, and an OTLP receiver (decoding with the
//! `opentelemetry-proto` crate) gets the spans of that trace: request,
//! ingest, delivery attempt, each the child of the one before.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use http::StatusCode;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message;
use reqwest::Method;
use serde_json::json;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Debug, Clone)]
struct Exported {
    service: String,
    trace_id: String,
    span_id: String,
    parent: String,
    name: String,
    /// `http.route`, on request spans.
    route: Option<String>,
}

/// An OTLP/HTTP receiver on loopback: `POST /v1/traces`, protobuf.
async fn otlp_receiver() -> (String, Arc<Mutex<Vec<Exported>>>) {
    let spans = Arc::new(Mutex::new(Vec::new()));
    let kept = spans.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                for resource in request.resource_spans {
                    let service = resource
                        .resource
                        .iter()
                        .flat_map(|r| &r.attributes)
                        .find(|a| a.key == "service.name")
                        .and_then(|a| a.value.as_ref())
                        .map(|v| format!("{:?}", v.value))
                        .unwrap_or_default();
                    for scope in resource.scope_spans {
                        for span in scope.spans {
                            kept.lock().unwrap().push(Exported {
                                service: service.clone(),
                                trace_id: hex(&span.trace_id),
                                span_id: hex(&span.span_id),
                                parent: hex(&span.parent_span_id),
                                route: span
                                    .attributes
                                    .iter()
                                    .find(|a| a.key == "http.route")
                                    .and_then(|a| a.value.as_ref())
                                    .and_then(|v| match &v.value {
                                        Some(Value::StringValue(s)) => Some(s.clone()),
                                        _ => None,
                                    }),
                                name: span.name,
                            });
                        }
                    }
                }
                (
                    [(http::header::CONTENT_TYPE, "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), spans)
}

#[tokio::test]
async fn a_callers_trace_reaches_the_callback_the_history_and_the_exporter() {
    let (endpoint, spans) = otlp_receiver().await;
    let server = Server::start_with(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ]);
    let inbox = Receiver::start(Handshake::Echo).await;
    let (status, sub) = server
        .create("org-1", &inbox.uri("/hook"), &[&contact("org-1", "dep-1")])
        .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    let sub_id = sub["id"].as_str().unwrap();

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let event = json!({"eventId": "evt-traced", "type": "contact.created", "organizationId": "org-1",
                       "departmentId": "dep-1", "contact": {"id": "contact-1"}});
    let (status, body) = send(
        server
            .req(Method::POST, "/events", "org-1")
            .header("traceparent", format!("00-{trace_id}-{caller_span}-01"))
            .json(&event),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    // The callback's POST carries the trace.
    let posts = inbox.wait_for(1, Duration::from_secs(20)).await;
    let traceparent = posts[0].headers["traceparent"].to_str().unwrap().to_owned();
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(
        (parts.len(), parts[0], parts[1], parts[3]),
        (4, "00", trace_id, "01"),
        "{traceparent}"
    );
    let attempt_span = parts[2].to_owned();
    assert_ne!(attempt_span, caller_span);

    // The notification's detail shows its trace id.
    let uuid = posts[0].headers["webhook-id"].to_str().unwrap();
    let path = format!("/webhooksubscription/{sub_id}/notifications/{uuid}");
    let (status, detail) = server.get(&path, "org-1").await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    assert_eq!(detail["traceId"], trace_id, "{detail}");

    // The exporter sends request → ingest → delivery attempt, each the child of the one before.
    let deadline = Instant::now() + Duration::from_secs(20);
    let of_trace = loop {
        let of_trace: Vec<Exported> = spans
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.trace_id == trace_id)
            .cloned()
            .collect();
        if of_trace.iter().any(|s| s.name == "delivery attempt") || Instant::now() > deadline {
            break of_trace;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let named = |name: &str| {
        of_trace
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no {name} span of the trace in {of_trace:?}"))
            .clone()
    };
    let (request, ingest, attempt) = (named("request"), named("ingest"), named("delivery attempt"));
    assert_eq!(request.parent, caller_span, "{request:?}");
    assert_eq!(ingest.parent, request.span_id, "{ingest:?}");
    assert_eq!(attempt.parent, ingest.span_id, "{attempt:?}");
    assert_eq!(
        attempt.span_id, attempt_span,
        "the POST carries the attempt's span"
    );
    assert!(request.service.contains("webhooks-local"), "{request:?}");

    // Without a traceparent: a new trace, still carried to the callback.
    let event = json!({"eventId": "evt-untraced", "type": "contact.created", "organizationId": "org-1",
                       "departmentId": "dep-1", "contact": {"id": "contact-2"}});
    assert_eq!(
        produce(&server, "org-1", &event).await,
        StatusCode::ACCEPTED
    );
    let posts = inbox.wait_for(2, Duration::from_secs(20)).await;
    let other = posts[1].headers["traceparent"].to_str().unwrap();
    assert_eq!(other.len(), 55, "{other}");
    assert!(!other.contains(trace_id), "a new trace: {other}");

    // Reads are recorded only when their caller traces them (OTEL_TRACES_SAMPLER unset):
    // an untraced get exports nothing, a traced one its request span. Spans are
    // exported in the order they end, so once the traced one is in, the other would be.
    let get = format!("/webhooksubscription/{sub_id}");
    assert_eq!(server.get(&get, "org-1").await.0, StatusCode::OK);
    let read_trace = "5bf92f3577b34da6a3ce929d0e0e4737";
    let (status, _) = send(
        server
            .req(Method::GET, &get, "org-1")
            .header("traceparent", format!("00-{read_trace}-{caller_span}-01")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !spans
        .lock()
        .unwrap()
        .iter()
        .any(|s| s.trace_id == read_trace)
    {
        assert!(
            Instant::now() < deadline,
            "the traced read was not exported"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reads: Vec<Exported> = spans
        .lock()
        .unwrap()
        .iter()
        .filter(|s| {
            matches!(
                s.route.as_deref(),
                Some("get_subscription" | "get_notification")
            )
        })
        .cloned()
        .collect();
    assert_eq!(reads.len(), 1, "only the traced read: {reads:?}");
    assert_eq!(reads[0].trace_id, read_trace);
}
