//! Lambda `rotate-subscription-secret`: POST /webhooksubscription/{id}/secret/rotate: a new
//! signing secret, the replaced one still signing for its grace period.
//! Everything but start-up lives in `webhook_core::lambda`.

use lambda_http::{run, service_fn, Error};
use webhook_core::lambda::{self, Endpoint};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    let app = lambda::app_from_env().await?;
    run(service_fn(|request| {
        lambda::handle(&app, Endpoint::RotateSubscriptionSecret, request)
    }))
    .await
}
