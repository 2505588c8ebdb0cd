//! The HTTP face of the handlers, shared by every runtime: dispatch of a
//! [`Route`] to its handler, body and query parsing, and rendering of
//! results and problems. Lambda functions call [`handle`]; `webhooks-local`
//! calls [`serve`], which also authenticates and ingests events.

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::Instrument;

use crate::api::{event_types, messages, notifications, rotation, subscriptions};
use crate::app::App;
use crate::auth::{Authenticator, Caller};
use crate::error::{ApiError, ErrorCode, FieldError, PROBLEM_JSON};
use crate::ingest::{self, EventEnvelope};
use crate::list_json;
use crate::page::PageRequest;
use crate::queue::{DeliveryQueue, Outbox};
use crate::routes::{route_not_found, Route};
use crate::services::Services;
use crate::telemetry::trace::{self, TraceParent};

/// Request bodies larger than this are refused with 413.
pub const MAX_BODY: usize = 64 * 1024;

/// Serves a request for a caller that is already authenticated. `queue` is
/// the delivery queue, for the routes that send notifications again
/// (resend, recover); runtimes that serve neither pass None.
pub async fn handle(
    app: &App,
    queue: Option<&dyn DeliveryQueue>,
    caller: &Caller,
    route: Route,
    headers: &HeaderMap,
    query: Option<&str>,
    body: &[u8],
) -> Response<Bytes> {
    let dispatched = dispatch(app, queue, caller, route, headers, query, body);
    let result = within_deadline(app, dispatched).await;
    result.unwrap_or_else(|e| error_response(&e))
}

/// `work` under the request's deadline (`crate::deadline`): past it, `503
/// DEADLINE_EXCEEDED` with `Retry-After`.
async fn within_deadline<T>(
    app: &App,
    work: impl std::future::Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    let budget = app.config.api_deadline;
    crate::deadline::within(budget, work)
        .await
        .unwrap_or_else(|_| {
            tracing::warn!(
                deadline_ms = budget.as_millis() as u64,
                "the request's store and queue calls passed its deadline"
            );
            Err(ApiError::unavailable(
                ErrorCode::DeadlineExceeded,
                format!(
                    "the service's dependencies did not answer within the request's {} ms; \
                 the same request can be sent again",
                    budget.as_millis()
                ),
            ))
        })
}

async fn dispatch(
    app: &App,
    queue: Option<&dyn DeliveryQueue>,
    caller: &Caller,
    route: Route,
    headers: &HeaderMap,
    query: Option<&str>,
    body: &[u8],
) -> Result<Response<Bytes>, ApiError> {
    caller.require_scope_for(&route.method(), &app.config.jwt.scopes)?;
    match route {
        Route::CreateSubscription => {
            let request = parse_json(headers, body)?;
            json(
                StatusCode::OK,
                // Boxed, like every route that calls out: their futures are
                // kilobytes, and an unboxed one would size (and be copied
                // with) every request's future, a get's too.
                &Box::pin(subscriptions::create_subscription(app, caller, request)).await?,
            )
        }
        Route::ListSubscriptions => {
            let page = PageRequest::from_query(query, subscriptions::SORTABLE)?;
            let listed = subscriptions::list_subscriptions(app, caller, &page).await?;
            Ok(json_bytes(StatusCode::OK, list_json::page(&listed)))
        }
        Route::GetSubscription(id) => {
            let found = subscriptions::get_subscription(app, caller, &id).await?;
            Ok(json_bytes(StatusCode::OK, list_json::subscription(&found)))
        }
        Route::DeleteSubscription(id) => {
            subscriptions::delete_subscription(app, caller, &id).await?;
            Ok(Response::builder()
                .status(StatusCode::NO_CONTENT)
                .body(Bytes::new())
                .expect("valid response"))
        }
        Route::GetSubscriptionSecret(id) => json(
            StatusCode::OK,
            &subscriptions::get_subscription_secret(app, caller, &id).await?,
        ),
        Route::RotateSubscriptionSecret(id) => {
            // The body is optional: none (or an empty one) takes the defaults.
            let request = if body.iter().all(u8::is_ascii_whitespace) {
                Default::default()
            } else {
                parse_json(headers, body)?
            };
            json(
                StatusCode::OK,
                &Box::pin(rotation::rotate_subscription_secret(
                    app, caller, &id, request,
                ))
                .await?,
            )
        }
        Route::GetMessage(id) => json(
            StatusCode::OK,
            &messages::get_message(app, caller, &id).await?,
        ),
        Route::ListNotifications(id) => json(
            StatusCode::OK,
            &notifications::list_notifications(app, caller, &id, query).await?,
        ),
        Route::GetNotification(id, uuid) => json(
            StatusCode::OK,
            &notifications::get_notification(app, caller, &id, &uuid).await?,
        ),
        Route::ResendNotification(id, uuid) => json(
            StatusCode::ACCEPTED,
            &Box::pin(notifications::resend_notification(
                app,
                needs(queue)?,
                caller,
                &id,
                &uuid,
            ))
            .await?,
        ),
        Route::RecoverNotifications(id) => {
            let request = parse_json(headers, body)?;
            json(
                StatusCode::ACCEPTED,
                &Box::pin(notifications::recover_notifications(
                    app,
                    needs(queue)?,
                    caller,
                    &id,
                    request,
                ))
                .await?,
            )
        }
        Route::GetDeliveryStats(id) => json(
            StatusCode::OK,
            &notifications::delivery_stats(app, caller, &id, query).await?,
        ),
        Route::GetDestinationIdentity => json(
            StatusCode::OK,
            &subscriptions::destination_identity(app, caller),
        ),
        Route::ListEventTypes => Ok(json_bytes(StatusCode::OK, event_types::list_event_types())),
        Route::GetEventType(kind) => Ok(json_bytes(
            StatusCode::OK,
            event_types::get_event_type(&kind)?,
        )),
        // Served only where the runtime ingests over HTTP: see `ingest_event`.
        Route::IngestEvent => Err(route_not_found(Route::IngestEvent.endpoint().path())),
    }
}

/// The delivery queue a route needs; a runtime built without it serves
/// no such route (a deployment error, not the client's).
fn needs(queue: Option<&dyn DeliveryQueue>) -> Result<&dyn DeliveryQueue, ApiError> {
    queue.ok_or_else(|| {
        tracing::error!("this function has no delivery queue (WEBHOOKS_DELIVERY_QUEUE_URL)");
        ApiError::internal()
    })
}

/// `POST /events`, for a caller that is already authenticated.
async fn ingest_event(
    app: &App,
    outbox: &dyn Outbox,
    caller: &Caller,
    headers: &HeaderMap,
    body: &[u8],
) -> Response<Bytes> {
    let result = async {
        caller.require_scope_for(&Route::IngestEvent.method(), &app.config.jwt.scopes)?;
        let envelope: EventEnvelope = parse_json(headers, body)?;
        // The event's notifications carry the `ingest` span's context (`trace::current`).
        let mut span = trace::start("ingest", trace::Kind::Internal, trace::current());
        let accepted = trace::scope(
            span.context(),
            within_deadline(app, ingest::accept(app, outbox, caller, envelope)),
        );
        let ingested = accepted.await.inspect_err(|_| span.error("not ingested"))?;
        span.set("webhooks.notifications", ingested.notifications as i64);
        crate::telemetry::metrics::event_ingested(ingested.notifications, ingested.duplicate);
        json(StatusCode::ACCEPTED, &ingested)
    };
    result.await.unwrap_or_else(|e| error_response(&e))
}

/// Routes, authenticates (API key, bearer token) and serves a request:
/// the whole API, event ingestion included, for runtimes that are not
/// behind API Gateway.
pub async fn serve(
    services: &Services,
    auth: &Authenticator,
    request: http::Request<Bytes>,
) -> Response<Bytes> {
    let (parts, body) = request.into_parts();
    let route = match Route::resolve(&parts.method, parts.uri.path()) {
        Ok(route) => route,
        Err(e) => return with_route_label(error_response(&e), "unmatched"),
    };
    let label = route.endpoint().label();
    // The caller's `traceparent` is honoured; a new trace otherwise.
    let parent = parts
        .headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok());
    let read = parts.method == http::Method::GET;
    let mut span = trace::request_span(parent.and_then(TraceParent::parse), read);
    span.set("http.route", label);
    let response = trace::scope(
        span.context(),
        serve_route(services, auth, route, parts, body),
    )
    .await;
    span.set(
        "http.response.status_code",
        i64::from(response.status().as_u16()),
    );
    with_route_label(response, label)
}

/// The `route` label of the request a response answers (see
/// [`Endpoint::label`](crate::routes::Endpoint::label)), in the response's extensions: the
/// runtime counts the request without resolving its route a second time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteLabel(pub &'static str);

fn with_route_label(mut response: Response<Bytes>, label: &'static str) -> Response<Bytes> {
    response.extensions_mut().insert(RouteLabel(label));
    response
}

async fn serve_route(
    services: &Services,
    auth: &Authenticator,
    route: Route,
    parts: http::request::Parts,
    body: Bytes,
) -> Response<Bytes> {
    let caller = match auth.authenticate(&parts.headers).await {
        Ok(caller) => caller,
        Err(e) => return error_response(&e),
    };
    let span = tracing::info_span!("request", org_id = %caller.org_id);
    let app = services.app.as_ref();
    if route == Route::IngestEvent {
        return Box::pin(ingest_event(
            app,
            services.outbox.as_ref(),
            &caller,
            &parts.headers,
            &body,
        ))
        .instrument(span)
        .await;
    }
    handle(
        app,
        Some(services.queue.as_ref()),
        &caller,
        route,
        &parts.headers,
        parts.uri.query(),
        &body,
    )
    .instrument(span)
    .await
}

/// Parses a JSON request body: 413 when too large, 415 when not JSON,
/// `MALFORMED_JSON` for a syntax error, `VALIDATION_FAILED` for a wrong type.
pub fn parse_json<T: DeserializeOwned>(headers: &HeaderMap, body: &[u8]) -> Result<T, ApiError> {
    if body.len() > MAX_BODY {
        return Err(payload_too_large());
    }
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime != "application/json" && !(mime.starts_with("application/") && mime.ends_with("+json"))
    {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::UnsupportedMediaType,
            "the request body must be application/json",
        ));
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    match serde_path_to_error::deserialize(de) {
        Ok(value) => Ok(value),
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                Err(ApiError::malformed_json(format!(
                    "the request body is not valid JSON: {inner}"
                )))
            } else {
                let field = if path == "." { "body".to_owned() } else { path };
                Err(ApiError::validation(vec![FieldError::new(
                    field,
                    inner.to_string(),
                )]))
            }
        }
    }
}

/// The `413 PAYLOAD_TOO_LARGE` problem of a body over `MAX_BODY` bytes.
pub fn payload_too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::PayloadTooLarge,
        format!("the request body must be at most {MAX_BODY} bytes"),
    )
}

/// `value` as a JSON response with `status`; `500` if it cannot be serialized.
pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Result<Response<Bytes>, ApiError> {
    let body = serde_json::to_vec(value).map_err(|_| ApiError::internal())?;
    Ok(json_bytes(status, body))
}

/// An answer whose JSON is already written.
fn json_bytes(status: StatusCode, body: Vec<u8>) -> Response<Bytes> {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "application/json")
        .body(Bytes::from(body))
        .expect("valid response")
}

/// The one place an [`ApiError`] becomes a response.
pub fn error_response(e: &ApiError) -> Response<Bytes> {
    let mut response = Response::builder()
        .status(e.status)
        .header(CONTENT_TYPE, PROBLEM_JSON)
        .body(Bytes::from(e.to_body()))
        .expect("valid response");
    for (name, value) in &e.headers {
        if let Ok(v) = HeaderValue::from_str(value) {
            response.headers_mut().append(name.clone(), v);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_errors() {
        let mut h = HeaderMap::new();
        type Req = crate::model::SubscriptionRequest;
        assert_eq!(
            parse_json::<Req>(&h, b"{}").unwrap_err().code,
            "UNSUPPORTED_MEDIA_TYPE"
        );
        h.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        assert_eq!(
            parse_json::<Req>(&h, b"{\"uri\":").unwrap_err().code,
            "MALFORMED_JSON"
        );
        let e = parse_json::<Req>(&h, b"{\"uri\": 5}").unwrap_err();
        assert_eq!(
            (e.code.as_str(), e.errors[0].field.as_str()),
            ("VALIDATION_FAILED", "uri")
        );
        assert_eq!(
            parse_json::<Req>(&h, &vec![b' '; MAX_BODY + 1])
                .unwrap_err()
                .code,
            "PAYLOAD_TOO_LARGE"
        );
        let ok: Req = parse_json(
            &h,
            br#"{"uri":"https://x","eventFilters":[],"expiresDateInMillis":5,"extra":1}"#,
        )
        .unwrap();
        assert_eq!(ok.expires_date_in_millies, Some(5));
    }
}
