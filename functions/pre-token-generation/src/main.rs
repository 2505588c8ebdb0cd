//! Lambda `pre-token-generation`: Cognito trigger (event version 2) that puts
//! the user's organization into the access token. Everything but start-up
//! lives in `webhook_core::lambda::pre_token`.

use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use webhook_core::lambda::{self, pre_token};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    let claim = pre_token::org_claim_from_env();
    run(service_fn(|event: LambdaEvent<_>| async {
        Ok::<_, Error>(pre_token::add_org_claim(event.payload, &claim))
    }))
    .await
}
