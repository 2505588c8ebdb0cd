//! Lambda `create-subscription`: POST /webhooksubscription: create or update a subscription after the callback handshake.
//! Everything but start-up lives in `webhook_core::lambda`.

use lambda_http::{run, service_fn, Error};
use webhook_core::lambda::{self, Endpoint};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    // The handshake calls the callback; a destination's validation, AWS.
    let app = lambda::app_with_destinations_from_env().await?;
    app.callbacks.warm_up();
    run(service_fn(|request| {
        lambda::handle(&app, Endpoint::CreateSubscription, request)
    }))
    .await
}
