//! The `console` function: the web console's page and files, on the
//! routes `GET /console` and `GET /console/{proxy+}`, which have no
//! authorizer and no API key (the page holds nothing secret; the API calls
//! it makes carry both). The file comes from the `proxy` path parameter.

use std::convert::Infallible;

use lambda_http::{Body, Request, RequestExt, Response};

use super::into_lambda;
use crate::console::Console;

/// Serves one API Gateway request for the console. Never fails.
pub fn handle(console: &Console, request: Request) -> Result<Response<Body>, Infallible> {
    let rest = request
        .path_parameters_ref()
        .and_then(|p| p.first("proxy"))
        .map(|file| format!("/{file}"))
        .unwrap_or_default();
    Ok(into_lambda(console.serve(
        request.method(),
        &rest,
        request.headers(),
    )))
}
