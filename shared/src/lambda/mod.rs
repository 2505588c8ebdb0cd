//! The Lambda runtime's face of the handlers (feature `aws`): which function
//! a process of the one Lambda binary serves and its start-up ([`function`]),
//! and [`handle`], which turns an API Gateway (REST, v1 proxy) request into a
//! call to [`crate::http::handle`].
//!
//! API Gateway has already checked the API key and run the [`authorizer`];
//! the caller comes from `requestContext.authorizer` (`orgId`, `sub`,
//! `scope`), or `requestContext.authorizer.lambda` behind the HTTP API
//! option (payload format 2.0), where it may hold a refusal instead. Each function serves one [`Endpoint`] of the routing table
//! (`routes.rs`), so the route is known and the id comes from
//! `pathParameters`: the path itself (with or without the `/prod` stage, or
//! a custom domain's base path) is not parsed.

pub mod authorizer;
pub mod console;
pub mod function;
pub mod pre_token;
pub mod queues;
pub mod schedule;

use std::convert::Infallible;

use bytes::Bytes;
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use serde_json::Value;
use tracing::Instrument;

use crate::app::App;
use crate::auth::Caller;
use crate::error::{ApiError, ErrorCode};
use crate::http::error_response;
use crate::queue::DeliveryQueue;
pub use crate::routes::Endpoint;
use crate::routes::Route;
pub use function::Function;

/// Start-up failures: the message names the variable or resource at fault.
pub type StartError = Box<dyn std::error::Error + Send + Sync>;

/// JSON logs to stdout (CloudWatch), filtered by `RUST_LOG` (default
/// `info`). Each line carries its spans: the runtime's `Lambda runtime
/// invoke` span with the `requestId`, and the handler's span with `org_id`.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(false)
        .with_span_list(true)
        .with_target(false)
        .with_ansi(false)
        .try_init();
}

/// Serves one API Gateway request for `endpoint`. Never fails: every error
/// is a problem+json response.
pub async fn handle(
    app: &App,
    endpoint: Endpoint,
    request: Request,
) -> Result<Response<Body>, Infallible> {
    handle_with_queue(app, None, endpoint, request).await
}

/// The reads that call nothing (the caller's organization and the binary
/// are all they need): one function with no permission serves them all,
/// `get-destination-identity`, through [`handle_one_of`].
pub const READS_WITHOUT_CALLS: [Endpoint; 3] = [
    Endpoint::GetDestinationIdentity,
    Endpoint::ListEventTypes,
    Endpoint::GetEventType,
];

/// Serves a request for the one of `endpoints` whose path API Gateway
/// matched (`requestContext.resourcePath`, or the HTTP API's `routeKey`):
/// a function serving several read-only routes that need the same
/// permissions (`get-destination-identity` also serves the event
/// catalogue, which needs none). `404 ROUTE_NOT_FOUND` for any other path.
pub async fn handle_one_of(
    app: &App,
    endpoints: &[Endpoint],
    request: Request,
) -> Result<Response<Body>, Infallible> {
    let resource = match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV1(context)) => context.resource_path.clone(),
        Some(RequestContext::ApiGatewayV2(context)) => context
            .route_key
            .as_deref()
            .and_then(|key| key.split_once(' '))
            .map(|(_, path)| path.to_owned()),
        _ => None,
    };
    let resource = resource.unwrap_or_default();
    match endpoints.iter().find(|e| e.path() == resource) {
        Some(endpoint) => handle(app, *endpoint, request).await,
        None => Ok(into_lambda(error_response(
            &crate::routes::route_not_found(&resource),
        ))),
    }
}

/// [`handle`] for the endpoints that enqueue notifications (resend, recover).
pub async fn handle_with_queue(
    app: &App,
    queue: Option<&dyn DeliveryQueue>,
    endpoint: Endpoint,
    request: Request,
) -> Result<Response<Body>, Infallible> {
    let caller = match caller(&request) {
        Ok(caller) => caller,
        Err(e) => return Ok(into_lambda(error_response(&e))),
    };
    let route = match route(endpoint, &request) {
        Ok(route) => route,
        Err(e) => return Ok(into_lambda(error_response(&e))),
    };
    let span = tracing::info_span!("request", org_id = %caller.org_id, endpoint = ?endpoint);
    let response = crate::http::handle(
        app,
        queue,
        &caller,
        route,
        request.headers(),
        request.uri().query(),
        request.body().as_ref(),
    )
    .instrument(span)
    .await;
    Ok(into_lambda(response))
}

fn route(endpoint: Endpoint, request: &Request) -> Result<Route, ApiError> {
    let parameters = request.path_parameters_ref();
    Route::for_endpoint(endpoint, request.method(), |name| {
        parameters.and_then(|p| p.first(name))
    })
}

/// The caller API Gateway's authorizer vouched for, from
/// `requestContext.authorizer` (REST) or `requestContext.authorizer.lambda`
/// (HTTP API): `orgId`, `sub`, `scope` (space separated); or the problem the
/// HTTP API's authorizer found (`refusal`, `status`, `detail`).
pub fn caller(request: &Request) -> Result<Caller, ApiError> {
    let missing = || {
        ApiError::invalid_token("the request carries no authorizer context with an organization")
    };
    let fields = match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV1(context)) => &context.authorizer.fields,
        Some(RequestContext::ApiGatewayV2(context)) => match &context.authorizer {
            Some(authorizer) => &authorizer.fields,
            None => return Err(missing()),
        },
        _ => return Err(missing()),
    };
    let text = |name: &str| fields.get(name).and_then(Value::as_str);
    if let Some(code) = text("refusal") {
        return Err(refusal(code, fields.get("status"), text("detail")));
    }
    let org_id = text("orgId")
        .filter(|org| crate::filter::id("orgId", org).is_ok())
        .ok_or_else(missing)?;
    Ok(Caller {
        org_id: org_id.into(),
        subject: text("sub").map(str::to_owned),
        scopes: text("scope")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
    })
}

/// The problem the HTTP API's authorizer refused the request with, as
/// `webhooks-local` answers it; anything unexpected is an invalid token.
fn refusal(code: &str, status: Option<&Value>, detail: Option<&str>) -> ApiError {
    let detail = detail.unwrap_or("the request was refused").to_owned();
    let code = ErrorCode::ALL.iter().find(|c| c.as_str() == code).copied();
    let status = status
        .and_then(Value::as_u64)
        .and_then(|s| http::StatusCode::from_u16(s as u16).ok())
        .filter(|s| *s == http::StatusCode::FORBIDDEN);
    match (code, status) {
        (Some(code), Some(status)) if code != ErrorCode::InvalidToken => {
            ApiError::new(status, code, detail)
        }
        _ => ApiError::invalid_token(detail),
    }
}

/// A response for API Gateway: JSON bodies as text (REST APIs pass base64
/// bodies through undecoded unless binary media types are configured).
pub(crate) fn into_lambda(response: Response<Bytes>) -> Response<Body> {
    response.map(|bytes| {
        if bytes.is_empty() {
            Body::Empty
        } else {
            match String::from_utf8(bytes.to_vec()) {
                Ok(text) => Body::Text(text),
                Err(e) => Body::Binary(e.into_bytes()),
            }
        }
    })
}
