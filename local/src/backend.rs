//! Which backend `webhooks-local serve` runs on: the embedded SQLite file in
//! the data dir (the default), or DynamoDB and SQS (`--backend aws`) with
//! endpoint, region and credentials from the AWS SDK's standard environment
//! (`AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL_SQS`, `AWS_REGION`,
//! `AWS_PROFILE` or keys), the tables from `WEBHOOKS_SUBSCRIPTIONS_TABLE` /
//! `WEBHOOKS_MESSAGES_TABLE` (default `webhooks-subscriptions`,
//! `webhooks-messages`) and the queues from `WEBHOOKS_DELIVERY_QUEUE_URL` /
//! `WEBHOOKS_DELIVERY_DLQ_URL`, polled the way Lambda's event source mapping
//! does. The adapters themselves are built by `webhook_core::services`.

use webhook_core::services::aws::{AwsBackend, Prepare};
use webhook_core::services::Backend as Storage;
use webhook_core::Config;

use crate::ServeArgs;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// The SQLite file in the data dir.
    Sqlite,
    /// DynamoDB: real AWS, or DynamoDB Local through AWS_ENDPOINT_URL_DYNAMODB.
    Aws,
}

/// The backend the arguments ask for.
pub fn choose(args: &ServeArgs, config: &Config) -> Result<Storage, String> {
    match args.backend {
        Backend::Sqlite if args.create_tables => Err(
            "--create-tables creates DynamoDB tables and SQS queues: use it with --backend aws"
                .into(),
        ),
        Backend::Sqlite => Ok(Storage::Sqlite(args.data_dir.join("webhooks.db"))),
        Backend::Aws => {
            let prepare = if args.create_tables {
                Prepare::Create
            } else {
                Prepare::Check
            };
            Ok(Storage::Aws(AwsBackend::from_config(config, prepare)))
        }
    }
}
