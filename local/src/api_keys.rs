//! `webhooks-local api-keys`: the API keys of a deployment with the HTTP API
//! option (`ApiType=http`), stored hashed in its subscriptions table
//! (`WEBHOOKS_SUBSCRIPTIONS_TABLE`; AWS credentials, region and endpoint from
//! the SDK's environment), the table the `authorizer` reads.

use clap::{Args, Subcommand};
use webhook_core::clock::{Clock, SystemClock};
use webhook_core::services::aws::{tables_store, Revoked};
use webhook_core::{Config, Profile};

#[derive(Args)]
pub struct ApiKeysArgs {
    #[command(subcommand)]
    command: ApiKeysCommand,
}

#[derive(Subcommand)]
enum ApiKeysCommand {
    /// Create a key for an organization and print it (the only time it is shown).
    Create {
        /// Organization id the key belongs to (a token must carry the same).
        #[arg(long)]
        org: String,
    },
    /// Revoke a key by its id (the part between `wk_` and the dot, printed by `create`).
    Revoke {
        /// The key's id.
        key_id: String,
    },
}

pub fn run(args: ApiKeysArgs) -> Result<(), String> {
    let config = Config::from_env(Profile::Local).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let store = tables_store(&config).await;
        let table = store.tables().subscriptions.clone();
        let now = SystemClock.now_ms();
        match args.command {
            ApiKeysCommand::Create { org } => {
                webhook_core::filter::id("--org", &org).map_err(|e| e.to_string())?;
                let new = store
                    .create_api_key(&org.as_str().into(), now)
                    .await
                    .map_err(|e| format!("{table}: {e}"))?;
                eprintln!(
                    "key {} for organization {org} in {table}; it is not shown again:",
                    new.id
                );
                println!("{}", new.key);
                Ok(())
            }
            ApiKeysCommand::Revoke { key_id } => {
                if !webhook_core::auth::tenant_key::is_key_id(&key_id) {
                    return Err(format!("{key_id:?} is not a key id"));
                }
                match store.revoke_api_key(&key_id, now).await {
                    Ok(Revoked::Now) => {
                        println!("key {key_id} revoked");
                        Ok(())
                    }
                    Ok(Revoked::Already) => {
                        println!("key {key_id} was already revoked");
                        Ok(())
                    }
                    Ok(Revoked::NoSuchKey) => Err(format!("no key {key_id} in {table}")),
                    Err(e) => Err(format!("{table}: {e}")),
                }
            }
        }
    })
}
