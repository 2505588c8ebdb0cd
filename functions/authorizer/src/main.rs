//! Lambda `authorizer`: the REST API's REQUEST authorizer, and the HTTP API
//! option's (payload format 2.0), which also checks `x-api-key`. Verifies
//! the bearer token (HS256, or RS256/ES256 from a cached JWKS) and allows the
//! caller's organization. Everything but start-up lives in
//! `webhook_core::lambda::authorizer`.

use lambda_runtime::{run, service_fn, Error};
use webhook_core::lambda::{self, authorizer};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    let authorizer = authorizer::authorizer_from_env().await?;
    run(service_fn(|event| authorizer::handle(&authorizer, event))).await
}
