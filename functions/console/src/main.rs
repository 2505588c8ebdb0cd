//! Lambda `console`: GET /console and /console/{proxy+}, the web console
//! (no authorizer, no API key). Its only configuration is the OAuth
//! provider's domain and public client (`WEBHOOKS_CONSOLE_OAUTH_*`).
//! Everything but start-up lives in `webhook_core::lambda::console`.

use lambda_http::{run, service_fn, Error};
use webhook_core::console::{Console, ConsoleConfig};
use webhook_core::lambda;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_tracing();
    let console = Console::new(&ConsoleConfig::from_env()?);
    run(service_fn(|request| async {
        lambda::console::handle(&console, request)
    }))
    .await
}
