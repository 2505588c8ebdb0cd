//! The reference for Lambda init time: a `lambda_runtime` function that
//! answers every event with `null`, built with the same release profile as
//! the real functions.

use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    run(service_fn(|_: LambdaEvent<Value>| async {
        Ok::<_, Error>(Value::Null)
    }))
    .await
}
