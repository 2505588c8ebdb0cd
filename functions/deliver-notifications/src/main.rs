//! Lambda `deliver-notifications`: SQS DeliveryQueue → signed POSTs to
//! callbacks, with retries through the queue's visibility timeout.
//! Everything but start-up lives in `webhook_core::lambda::queues`.

use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use webhook_core::lambda::{self, queues};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    let functions = lambda::queue_functions_from_env().await?;
    functions.app.callbacks.warm_up(); // every delivery calls a callback
    run(service_fn(|event: LambdaEvent<_>| async {
        Ok::<_, Error>(
            queues::deliver_notifications(
                &functions.app,
                &functions.queue,
                &functions.outbox,
                event.payload,
            )
            .await,
        )
    }))
    .await
}
