//! Lambda `resend-notification`: POST /webhooksubscription/{id}/notifications/{uuid}/resend.
//! Enqueues on the delivery queue (it never calls the callback itself).
//! Everything but start-up lives in `webhook_core::lambda`.

use lambda_http::{run, service_fn, Error};
use webhook_core::lambda::{self, Endpoint};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    let (app, queue) = lambda::app_with_queue_from_env().await?;
    run(service_fn(|request| {
        lambda::handle_with_queue(&app, Some(&queue), Endpoint::ResendNotification, request)
    }))
    .await
}
