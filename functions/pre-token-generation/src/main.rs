//! Lambda `pre-token-generation`: Cognito trigger (event version 3) that puts
//! the organization into access tokens: a user's from their attribute, a
//! machine client's (client credentials) from `WEBHOOKS_MACHINE_CLIENTS`.
//! Everything but start-up lives in `webhook_core::lambda::pre_token`.

use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use webhook_core::lambda::{self, pre_token};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    let claim = pre_token::org_claim_from_env();
    let machines = pre_token::MachineClients::from_env()?;
    run(service_fn(|event: LambdaEvent<_>| async {
        pre_token::handle(event.payload, &claim, &machines).map_err(Error::from)
    }))
    .await
}
