//! Which store `webhooks-local serve` runs on: the embedded SQLite file (the
//! default), or DynamoDB (`--backend aws`) with its endpoint, region and
//! credentials from the AWS SDK's standard environment
//! (`AWS_ENDPOINT_URL_DYNAMODB`, `AWS_REGION`, `AWS_PROFILE` or keys) and
//! the tables from `WEBHOOKS_SUBSCRIPTIONS_TABLE` / `WEBHOOKS_MESSAGES_TABLE`
//! (default `webhooks-subscriptions`, `webhooks-messages`), and delivery on
//! SQS (`WEBHOOKS_DELIVERY_QUEUE_URL`, `WEBHOOKS_DELIVERY_DLQ_URL`, endpoint
//! `AWS_ENDPOINT_URL_SQS`), polled the way Lambda's event source mapping does.

use std::sync::Arc;

use webhook_core::queue::aws_outbox::AwsOutbox;
use webhook_core::queue::sqs::SqsQueue;
use webhook_core::queue::{DeliveryQueue, Outbox};
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

/// The ports a backend provides to the server and its delivery workers.
pub struct Services {
    pub store: Arc<dyn Store>,
    pub outbox: Arc<dyn Outbox>,
    pub queue: Arc<dyn DeliveryQueue>,
}

/// Opens the backend; `sqlite` is the data dir's file, which the SQLite
/// backend uses for everything (store, outbox and queue in one file).
pub async fn open(
    args: &ServeArgs,
    config: &Config,
    sqlite: Arc<SqliteStore>,
) -> Result<Services, String> {
    match args.backend {
        Backend::Sqlite if args.create_tables => Err(
            "--create-tables creates DynamoDB tables and SQS queues: use it with --backend aws"
                .into(),
        ),
        Backend::Sqlite => Ok(Services {
            store: sqlite.clone(),
            outbox: sqlite.clone(),
            queue: sqlite,
        }),
        Backend::Aws => {
            let tables = Tables::or_defaults(config);
            let sdk = webhook_core::aws::sdk_config().await;
            let store = DynamoStore::from_sdk(&sdk, tables.clone());
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
            let queue = delivery_queue(args, config, &tables, &sdk).await?;
            tracing::info!(
                subscriptions = %tables.subscriptions,
                messages = %tables.messages,
                "serving from DynamoDB, delivering through SQS"
            );
            let store = Arc::new(store);
            Ok(Services {
                outbox: Arc::new(AwsOutbox::new(store.clone(), queue.clone())),
                store,
                queue: Arc::new(queue),
            })
        }
    }
}

/// The SQS delivery queue: the configured one, or (with `--create-tables`)
/// a queue and dead-letter queue named after the subscriptions table.
async fn delivery_queue(
    args: &ServeArgs,
    config: &Config,
    tables: &Tables,
    sdk: &aws_config::SdkConfig,
) -> Result<SqsQueue, String> {
    let client = aws_sdk_sqs::Client::new(sdk);
    if let Some(url) = &config.delivery_queue_url {
        return Ok(SqsQueue::new(
            client,
            url,
            config.delivery_dead_letter_url.clone(),
        ));
    }
    if !args.create_tables {
        return Err("--backend aws needs WEBHOOKS_DELIVERY_QUEUE_URL (the stack's DeliveryQueueUrl output), \
             or --create-tables to create the queues"
            .into());
    }
    let create = |name: String| {
        let client = client.clone();
        async move {
            client
                .create_queue()
                .queue_name(&name)
                .send()
                .await
                .map_err(|e| {
                    format!(
                        "creating SQS queue {name}: {}",
                        aws_sdk_sqs::error::DisplayErrorContext(e)
                    )
                })?
                .queue_url()
                .map(str::to_owned)
                .ok_or_else(|| format!("SQS returned no URL for {name}"))
        }
    };
    let dead_letters = create(format!("{}-delivery-dlq", tables.subscriptions)).await?;
    let url = create(format!("{}-delivery", tables.subscriptions)).await?;
    Ok(SqsQueue::new(client, url, Some(dead_letters)))
}
