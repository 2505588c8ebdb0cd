//! Lambda `get-destination-identity`: GET /webhooksubscription/destination-identity: what the
//! role of an AWS destination must trust (docs/destinations.md).
//! Everything but start-up lives in `webhook_core::lambda`.

use lambda_http::{run, service_fn, Error};
use webhook_core::lambda::{self, Endpoint};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    let app = lambda::app_from_env().await?;
    run(service_fn(|request| {
        lambda::handle(&app, Endpoint::GetDestinationIdentity, request)
    }))
    .await
}
