//! Which store `webhooks-local serve` runs on: the embedded SQLite file (the
//! default), or DynamoDB (`--backend aws`) with its endpoint, region and
//! credentials from the AWS SDK's standard environment
//! (`AWS_ENDPOINT_URL_DYNAMODB`, `AWS_REGION`, `AWS_PROFILE` or keys) and
//! the tables from `WEBHOOKS_SUBSCRIPTIONS_TABLE` / `WEBHOOKS_MESSAGES_TABLE`
//! (default `webhooks-subscriptions`, `webhooks-messages`).

use std::sync::Arc;

use webhook_core::store::dynamodb::{self, DynamoStore, Tables};
use webhook_core::store::sqlite::SqliteStore;
use webhook_core::store::Store;
use webhook_core::Config;

use crate::ServeArgs;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// The SQLite file in the data dir.
    Sqlite,
    /// DynamoDB: real AWS, or DynamoDB Local through AWS_ENDPOINT_URL_DYNAMODB.
    Aws,
}

/// The store the API serves from; `sqlite` is the data dir's file, which
/// the SQLite backend uses as its store.
pub async fn open_store(
    args: &ServeArgs,
    config: &Config,
    sqlite: Arc<SqliteStore>,
) -> Result<Arc<dyn Store>, String> {
    match args.backend {
        Backend::Sqlite if args.create_tables => {
            Err("--create-tables creates DynamoDB tables: use it with --backend aws".into())
        }
        Backend::Sqlite => Ok(sqlite),
        Backend::Aws => {
            let tables = Tables::or_defaults(config);
            let store = DynamoStore::from_env(tables.clone()).await;
            let ready = if args.create_tables {
                dynamodb::create_tables(store.client(), &tables).await
            } else {
                dynamodb::check_tables(store.client(), &tables).await
            };
            ready.map_err(|e| {
                let hint = if args.create_tables {
                    ""
                } else {
                    " (create them with --create-tables, or deploy template.yaml)"
                };
                format!(
                    "DynamoDB tables {} and {}: {e}{hint}",
                    tables.subscriptions, tables.messages
                )
            })?;
            tracing::info!(
                subscriptions = %tables.subscriptions,
                messages = %tables.messages,
                "serving from DynamoDB"
            );
            Ok(Arc::new(store))
        }
    }
}
