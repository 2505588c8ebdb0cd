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
    let rest = match request.path_parameters_ref().and_then(|p| p.first("proxy")) {
        Some(file) => format!("/{file}"),
        // API Gateway routes `/console/` to the page's route: answer it as
        // `webhooks-local` does (a redirect to the page, so that its relative
        // links resolve where they should).
        None if request.uri().path().ends_with('/') => "/".to_owned(),
        None => String::new(),
    };
    Ok(into_lambda(console.serve(
        request.method(),
        &rest,
        request.headers(),
    )))
}
