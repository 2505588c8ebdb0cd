//! Lambda `ingest-events`: SQS EventsQueue → messages in DynamoDB and
//! notifications on DeliveryQueue. Everything but start-up lives in
//! `webhook_core::lambda::queues`.

use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use webhook_core::lambda::{self, queues};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    let functions = lambda::queue_functions_from_env().await?;
    run(service_fn(|event: LambdaEvent<_>| async {
        Ok::<_, Error>(
            queues::ingest_events(&functions.app, &functions.outbox, event.payload).await,
        )
    }))
    .await
}
