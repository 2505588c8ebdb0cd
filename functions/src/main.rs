//! The one Lambda binary: every function of template.yaml, each a process
//! of it with its own `WEBHOOKS_FUNCTION` (`authorizer`, `get-message`, ...),
//! role and route. Built, linked and zipped once (docs/decisions/build.md);
//! everything but choosing the function lives in `webhook_core::lambda`.

use lambda_runtime::Error;
use webhook_core::lambda::{self, Function};

// One thread: Lambda hands a process one invocation at a time and, at the
// template's 256 MB, a fraction of one vCPU, so worker threads would only add
// their start to every cold start (docs/decisions/build.md).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    let function = Function::from_env()?;
    function.run().await
}
