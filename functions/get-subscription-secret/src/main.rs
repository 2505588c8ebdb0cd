//! Lambda `get-subscription-secret`: GET /webhooksubscription/{id}/secret: the subscription's signing secret.
//! Everything but start-up lives in `webhook_core::lambda`.

use lambda_http::{run, service_fn, Error};
use webhook_core::lambda::{self, Endpoint};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    let app = lambda::app_from_env().await?;
    run(service_fn(|request| {
        lambda::handle(&app, Endpoint::GetSubscriptionSecret, request)
    }))
    .await
}
