//! Lambda `remind-expiring`: every minute (EventBridge schedule), tells
//! organizations about subscriptions expiring soon. Everything but start-up
//! lives in `webhook_core::lambda::schedule`.

use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use webhook_core::lambda::{self, schedule};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    let functions = lambda::queue_functions_from_env().await?;
    run(service_fn(|event: LambdaEvent<serde_json::Value>| async {
        schedule::remind_expiring(&functions.app, &functions.outbox, event.payload)
            .await
            .map_err(Error::from)
    }))
    .await
}
