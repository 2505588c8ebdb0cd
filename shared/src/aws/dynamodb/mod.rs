//! DynamoDB store adapter (feature `aws`): the same [`Store`](crate::store::Store) port as SQLite,
//! passing the same conformance suite, on two tables whose key schema is a
//! string partition key `pk` and a string sort key `sk` (`template.yaml`).
//! The tables, keys and items are documented in [`keys`], where every key
//! shape is built.
//!
//! One concern a file: [`keys`] (key shapes and the schema), [`codec`]
//! (items), [`write`] (conditional writes and transactions), [`read`]
//! (a partition, a batch of keys), [`backoff`],
//! [`store`] (the port), [`listing`] (lists paged in the store),
//! [`change`] (delivery state and secret rotation, copies included),
//! [`expiry`] (expiry reminders),
//! [`messages`] (messages and their retention), [`events`] (the outbox's
//! event records), [`history`] (the delivery history port) and
//! [`history_items`], [`api_keys`] (the HTTP API option's keys), [`tables`]
//! (provisioning).

pub mod api_keys;
mod backoff;
mod change;
mod codec;
pub mod events;
mod expiry;
mod history;
mod history_items;
mod keys;
mod listing;
mod messages;
mod parking;
mod rate;
mod read;
mod store;
mod tables;
mod write;

pub use tables::{check_tables, create_tables};

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;

use crate::config::{Config, ConfigError};
use crate::store::StoreError;

/// The subscriptions table's name when `WEBHOOKS_SUBSCRIPTIONS_TABLE` is unset (`webhooks-local`).
pub const DEFAULT_SUBSCRIPTIONS_TABLE: &str = "webhooks-subscriptions";
/// The messages table's name when `WEBHOOKS_MESSAGES_TABLE` is unset (`webhooks-local`).
pub const DEFAULT_MESSAGES_TABLE: &str = "webhooks-messages";

/// DynamoDB's limit on a sort key, in bytes.
pub(super) const MAX_SORT_KEY: usize = 1024;
/// DynamoDB's limit on a partition key, in bytes.
pub(super) const MAX_PARTITION_KEY: usize = 2048;
/// Attempts of one write before contention is reported as a failure.
pub(super) const MAX_ATTEMPTS: u32 = 16;

pub(super) type Item = HashMap<String, AttributeValue>;

/// The table names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tables {
    /// The subscriptions table: subscriptions, their filter index, list entries and expiry entries.
    pub subscriptions: String,
    /// The messages table: messages, event records, the delivery history and parked jobs.
    pub messages: String,
}

impl Tables {
    /// Both names from configuration; deployed functions must be told.
    pub fn required(config: &Config) -> Result<Tables, ConfigError> {
        let need = |value: &Option<String>, var: &'static str| {
            value.clone().ok_or(ConfigError {
                var,
                message: "is required (the DynamoDB table name)".into(),
            })
        };
        Ok(Tables {
            subscriptions: need(&config.subscriptions_table, "WEBHOOKS_SUBSCRIPTIONS_TABLE")?,
            messages: need(&config.messages_table, "WEBHOOKS_MESSAGES_TABLE")?,
        })
    }

    /// Names from configuration, else `webhooks-subscriptions` and `webhooks-messages`.
    pub fn or_defaults(config: &Config) -> Tables {
        Tables {
            subscriptions: config
                .subscriptions_table
                .clone()
                .unwrap_or_else(|| DEFAULT_SUBSCRIPTIONS_TABLE.into()),
            messages: config
                .messages_table
                .clone()
                .unwrap_or_else(|| DEFAULT_MESSAGES_TABLE.into()),
        }
    }
}

/// The store, delivery history and parking lot on DynamoDB's two tables.
#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    tables: Tables,
    /// How long delivery history is kept (its `ttl`).
    retention: Duration,
    /// How long messages are kept (their `ttl`).
    message_retention: Duration,
}

impl DynamoStore {
    /// A store keeping history and messages for the defaults' 30 days.
    pub fn new(client: Client, tables: Tables) -> Self {
        let month = Duration::from_secs(30 * 86_400);
        DynamoStore {
            client,
            tables,
            retention: month,
            message_retention: month,
        }
    }

    /// The store of a runtime: the client of `sdk`, and the retentions of
    /// `config` (`WEBHOOKS_DELIVERY_RETENTION`, `WEBHOOKS_MESSAGE_RETENTION`).
    pub fn configured(sdk: &aws_config::SdkConfig, tables: Tables, config: &Config) -> Self {
        Self::from_sdk(sdk, tables)
            .with_retention(config.delivery_retention)
            .with_message_retention(config.message_retention)
    }

    /// The same store keeping delivery history for `retention`.
    pub fn with_retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// The same store keeping messages for `retention`.
    pub fn with_message_retention(mut self, retention: Duration) -> Self {
        self.message_retention = retention;
        self
    }

    /// A client from the SDK's standard environment: region, credentials,
    /// and endpoint (`AWS_ENDPOINT_URL_DYNAMODB` / `AWS_ENDPOINT_URL`).
    pub async fn from_env(tables: Tables) -> Self {
        Self::from_sdk(&crate::aws::sdk_config().await, tables)
    }

    /// A store on the client of `sdk`, with the default retentions.
    pub fn from_sdk(sdk: &aws_config::SdkConfig, tables: Tables) -> Self {
        Self::new(Client::new(sdk), tables)
    }

    /// The DynamoDB client (tables are provisioned and checked with it).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The table names.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }
}

/// An SDK client from the standard environment, built once at start-up.
pub async fn client_from_env() -> Client {
    Client::new(&crate::aws::sdk_config().await)
}

/// A failed DynamoDB call: the service's error code and message, or why
/// no answer came (connection, timeout), with the SDK's error as its source.
#[derive(Debug, thiserror::Error)]
#[error("DynamoDB {summary}")]
pub struct DynamoDbError {
    summary: String,
    #[source]
    source: crate::store::Cause,
}

/// A failed request as a store error, the SDK's error kept: a transient
/// failure ([`crate::aws::is_transient`]) is [`StoreError::Unavailable`].
pub(super) fn backend<E>(e: SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let transient = crate::aws::is_transient(&e);
    let summary = match &e {
        SdkError::ServiceError(service) => format!(
            "{}: {}",
            service.err().code().unwrap_or("error"),
            service.err().message().unwrap_or("(no message)")
        ),
        _ => DisplayErrorContext(&e).to_string(),
    };
    let e = DynamoDbError {
        summary,
        source: Box::new(e),
    };
    if transient {
        StoreError::unavailable(e)
    } else {
        StoreError::backend(e)
    }
}

/// A conditional write's outcome: written, or its condition did not hold
/// (`Ok(false)`); any other failure as [`backend`] makes it.
pub(super) fn conditional<T, E>(
    result: Result<T, SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>>,
) -> Result<bool, StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match result {
        Ok(_) => Ok(true),
        Err(e)
            if e.as_service_error().and_then(|e| e.code())
                == Some("ConditionalCheckFailedException") =>
        {
            Ok(false)
        }
        Err(e) => Err(backend(e)),
    }
}

pub(super) fn backend_build(e: aws_sdk_dynamodb::error::BuildError) -> StoreError {
    StoreError::backend(e)
}
