//! Lambda `authorizer`: API Gateway REQUEST authorizer. Verifies the bearer token
//! (HS256, or RS256/ES256 from a cached JWKS) and allows the caller's organization.
//! Everything but start-up lives in `webhook_core::lambda::authorizer`.

use lambda_runtime::{run, service_fn, Error};
use webhook_core::lambda::{self, authorizer};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    let verifier = authorizer::verifier_from_env()?;
    run(service_fn(|event| authorizer::authorize(&verifier, event))).await
}
