//! The HTTP face of the handlers, shared by every runtime: routing of
//! `/prod/...` paths, body and query parsing, and rendering of results and
//! problems. Lambda functions and `webhooks-local` both call [`handle`].

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Method, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::Instrument;

use crate::app::App;
use crate::auth::{Authenticator, Caller};
use crate::error::{ApiError, FieldError, PROBLEM_JSON};
use crate::ingest::{self, EventEnvelope};
use crate::page::PageRequest;
use crate::{message, subscription};

/// Request bodies larger than this are refused with 413.
pub const MAX_BODY: usize = 64 * 1024;
/// API Gateway's stage; paths are accepted with or without it.
pub const STAGE_PREFIX: &str = "/prod";
const MAX_ID_LEN: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    CreateSubscription,
    ListSubscriptions,
    GetSubscription(String),
    DeleteSubscription(String),
    GetSubscriptionSecret(String),
    GetMessage(String),
    /// `POST /events`: event ingestion, where the runtime has an outbox.
    IngestEvent,
}

impl Route {
    /// Matches a method and path; unknown paths are 404, known paths with
    /// another method 405.
    pub fn resolve(method: &Method, path: &str) -> Result<Route, ApiError> {
        let path = path
            .strip_prefix(STAGE_PREFIX)
            .filter(|p| p.is_empty() || p.starts_with('/'))
            .unwrap_or(path);
        let path = path.strip_suffix('/').unwrap_or(path);
        let segments: Vec<&str> = path.split('/').skip(1).collect();
        let id = |raw: &str| -> Result<String, ApiError> {
            let decoded = percent_encoding::percent_decode_str(raw)
                .decode_utf8_lossy()
                .into_owned();
            if decoded.is_empty() || decoded.chars().count() > MAX_ID_LEN {
                Err(route_not_found(path))
            } else {
                Ok(decoded)
            }
        };
        let (allowed, route): (&[Method], Option<Route>) = match segments.as_slice() {
            ["webhooksubscription"] => (
                &[Method::POST],
                (method == Method::POST).then_some(Route::CreateSubscription),
            ),
            ["webhooksubscription", "all"] => (
                &[Method::GET],
                (method == Method::GET).then_some(Route::ListSubscriptions),
            ),
            ["webhooksubscription", raw] => (
                &[Method::GET, Method::DELETE],
                match *method {
                    Method::GET => Some(Route::GetSubscription(id(raw)?)),
                    Method::DELETE => Some(Route::DeleteSubscription(id(raw)?)),
                    _ => None,
                },
            ),
            ["webhooksubscription", raw, "secret"] => (
                &[Method::GET],
                (method == Method::GET)
                    .then(|| id(raw).map(Route::GetSubscriptionSecret))
                    .transpose()?,
            ),
            ["events"] => (
                &[Method::POST],
                (method == Method::POST).then_some(Route::IngestEvent),
            ),
            ["message", "getmessagebyid", raw] => (
                &[Method::GET],
                (method == Method::GET)
                    .then(|| id(raw).map(Route::GetMessage))
                    .transpose()?,
            ),
            _ => return Err(route_not_found(path)),
        };
        route.ok_or_else(|| {
            let allow = allowed
                .iter()
                .map(Method::as_str)
                .collect::<Vec<_>>()
                .join(", ");
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "METHOD_NOT_ALLOWED",
                format!("{method} is not allowed here; allowed: {allow}"),
            )
            .with_header(http::header::ALLOW, allow)
        })
    }

    pub fn method(&self) -> Method {
        match self {
            Route::CreateSubscription | Route::IngestEvent => Method::POST,
            Route::DeleteSubscription(_) => Method::DELETE,
            _ => Method::GET,
        }
    }
}

fn route_not_found(path: &str) -> ApiError {
    let shown: String = path.chars().take(200).collect();
    ApiError::not_found(
        "ROUTE_NOT_FOUND",
        format!("no resource at '{STAGE_PREFIX}{shown}'"),
    )
}

/// Serves a request for a caller that is already authenticated.
pub async fn handle(
    app: &App,
    caller: &Caller,
    route: Route,
    headers: &HeaderMap,
    query: Option<&str>,
    body: &[u8],
) -> Response<Bytes> {
    let result = dispatch(app, caller, route, headers, query, body).await;
    result.unwrap_or_else(|e| error_response(&e))
}

async fn dispatch(
    app: &App,
    caller: &Caller,
    route: Route,
    headers: &HeaderMap,
    query: Option<&str>,
    body: &[u8],
) -> Result<Response<Bytes>, ApiError> {
    caller.require_scope_for(&route.method())?;
    match route {
        Route::CreateSubscription => {
            let request = parse_json(headers, body)?;
            json(
                StatusCode::OK,
                &subscription::create_subscription(app, caller, request).await?,
            )
        }
        Route::ListSubscriptions => {
            let page = PageRequest::from_query(query, subscription::SORTABLE)?;
            json(
                StatusCode::OK,
                &subscription::list_subscriptions(app, caller, &page).await?,
            )
        }
        Route::GetSubscription(id) => json(
            StatusCode::OK,
            &subscription::get_subscription(app, caller, &id).await?,
        ),
        Route::DeleteSubscription(id) => {
            subscription::delete_subscription(app, caller, &id).await?;
            Ok(Response::builder()
                .status(StatusCode::NO_CONTENT)
                .body(Bytes::new())
                .expect("valid response"))
        }
        Route::GetSubscriptionSecret(id) => json(
            StatusCode::OK,
            &subscription::get_subscription_secret(app, caller, &id).await?,
        ),
        Route::GetMessage(id) => json(
            StatusCode::OK,
            &message::get_message(app, caller, &id).await?,
        ),
        Route::IngestEvent => {
            let Some(outbox) = &app.outbox else {
                return Err(route_not_found("/events"));
            };
            let envelope: EventEnvelope = parse_json(headers, body)?;
            let event = envelope.validate(crate::app::now_ms())?;
            if event.organization_id != caller.org_id {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "ORGANIZATION_MISMATCH",
                    "events can only be ingested for the caller's own organization",
                ));
            }
            json(
                StatusCode::ACCEPTED,
                &ingest::ingest(app, outbox.as_ref(), event).await?,
            )
        }
    }
}

/// Routes, authenticates (API key, bearer token) and serves a request:
/// the whole API for runtimes that are not behind API Gateway.
pub async fn serve(
    app: &App,
    auth: &Authenticator,
    request: http::Request<Bytes>,
) -> Response<Bytes> {
    let (parts, body) = request.into_parts();
    let route = match Route::resolve(&parts.method, parts.uri.path()) {
        Ok(route) => route,
        Err(e) => return error_response(&e),
    };
    let caller = match auth.authenticate(&parts.headers).await {
        Ok(caller) => caller,
        Err(e) => return error_response(&e),
    };
    let span = tracing::info_span!("request", org_id = %caller.org_id);
    handle(
        app,
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
            "UNSUPPORTED_MEDIA_TYPE",
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

pub fn payload_too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "PAYLOAD_TOO_LARGE",
        format!("the request body must be at most {MAX_BODY} bytes"),
    )
}

pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Result<Response<Bytes>, ApiError> {
    let body = serde_json::to_vec(value).map_err(|_| ApiError::internal())?;
    Ok(Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "application/json")
        .body(Bytes::from(body))
        .expect("valid response"))
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
    fn routes_with_and_without_stage() {
        let id = "00000000-0000-4000-8000-000000000001".to_owned();
        for prefix in ["", "/prod"] {
            let r = |m: Method, p: &str| Route::resolve(&m, &format!("{prefix}{p}"));
            assert_eq!(
                r(Method::POST, "/webhooksubscription"),
                Ok(Route::CreateSubscription)
            );
            assert_eq!(
                r(Method::GET, "/webhooksubscription/all"),
                Ok(Route::ListSubscriptions)
            );
            assert_eq!(
                r(Method::GET, &format!("/webhooksubscription/{id}")),
                Ok(Route::GetSubscription(id.clone()))
            );
            assert_eq!(
                r(Method::DELETE, &format!("/webhooksubscription/{id}/")),
                Ok(Route::DeleteSubscription(id.clone()))
            );
            assert_eq!(
                r(Method::GET, &format!("/webhooksubscription/{id}/secret")),
                Ok(Route::GetSubscriptionSecret(id.clone()))
            );
            assert_eq!(
                r(Method::GET, "/message/getmessagebyid/m%201"),
                Ok(Route::GetMessage("m 1".into()))
            );
        }
        assert_eq!(
            Route::resolve(&Method::GET, "/prod/nothing")
                .unwrap_err()
                .code,
            "ROUTE_NOT_FOUND"
        );
        assert_eq!(
            Route::resolve(&Method::GET, "/production/webhooksubscription/all")
                .unwrap_err()
                .code,
            "ROUTE_NOT_FOUND"
        );
        let e = Route::resolve(&Method::PUT, "/prod/webhooksubscription").unwrap_err();
        assert_eq!(
            (e.status, e.code),
            (StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED")
        );
        assert_eq!(e.headers[0].1, "POST");
    }

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
            (e.code, e.errors[0].field.as_str()),
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
