//! Lambda `get-destination-identity`: GET /webhooksubscription/destination-identity: what the
//! role of an AWS destination must trust (docs/destinations.md); and the event catalogue,
//! GET /event-types and GET /event-types/{kind} (docs/api.md, "Event catalogue"): reads that
//! call nothing, so one function with no permission serves them.
//! Everything but start-up lives in `webhook_core::lambda`.

use lambda_http::{run, service_fn, Error};
use webhook_core::lambda;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    let app = lambda::app_from_env().await?;
    run(service_fn(|request| {
        lambda::handle_one_of(&app, &lambda::READS_WITHOUT_CALLS, request)
    }))
    .await
}
