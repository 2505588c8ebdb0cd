//! The one Lambda binary: every function of template.yaml, each a process
//! of it with its own `WEBHOOKS_FUNCTION` (`authorizer`, `get-message`, ...),
//! role and route. Built, linked and zipped once (docs/decisions/build.md);
//! everything but choosing the function lives in `webhook_core::lambda`.

use lambda_runtime::Error;
use webhook_core::lambda::{self, Function};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    let function = Function::from_env()?;
    function.run().await
}
