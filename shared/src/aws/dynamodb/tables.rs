//! Table provisioning: create both tables (for `webhooks-local
//! --create-tables` and the benchmarks) or check that they exist.

use std::time::Duration;

use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::operation::create_table::CreateTableError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    TimeToLiveSpecification, TimeToLiveStatus,
};
use aws_sdk_dynamodb::Client;

use super::{backend, backend_build, Tables};
use crate::store::StoreError;

/// Creates both tables (string `pk` + `sk`, on-demand, TTL on `ttl`) unless
/// they exist, and waits until they are active. Idempotent.
pub async fn create_tables(client: &Client, tables: &Tables) -> Result<(), StoreError> {
    for name in [&tables.subscriptions, &tables.messages] {
        create_table(client, name).await?;
    }
    Ok(())
}

/// A failure about one table, named.
#[derive(Debug, thiserror::Error)]
#[error("table {table}: {cause}")]
struct TableError {
    table: String,
    #[source]
    cause: crate::store::Cause,
}

/// Fails, naming the table, unless both tables exist (a start-up check for
/// runtimes that do not create them).
pub async fn check_tables(client: &Client, tables: &Tables) -> Result<(), StoreError> {
    if client.config().region().is_none() {
        return Err(StoreError::backend(
            "no AWS region: set AWS_REGION (or a region in the AWS profile)",
        ));
    }
    for name in [&tables.subscriptions, &tables.messages] {
        client
            .describe_table()
            .table_name(name)
            .send()
            .await
            .map_err(|e| match backend(e) {
                StoreError::Backend(cause) => StoreError::backend(TableError {
                    table: name.clone(),
                    cause,
                }),
                other => other,
            })?;
    }
    Ok(())
}

async fn create_table(client: &Client, name: &str) -> Result<(), StoreError> {
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .map_err(backend_build)
    };
    let key_element = |name: &str, key_type: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(key_type)
            .build()
            .map_err(backend_build)
    };
    let created = client
        .create_table()
        .table_name(name)
        .attribute_definitions(attribute("pk")?)
        .attribute_definitions(attribute("sk")?)
        .key_schema(key_element("pk", KeyType::Hash)?)
        .key_schema(key_element("sk", KeyType::Range)?)
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await;
    match created {
        Ok(_) => {}
        Err(e)
            if matches!(
                e.as_service_error(),
                Some(CreateTableError::ResourceInUseException(_))
            ) => {}
        Err(e) => return Err(backend(e)),
    }
    client
        .wait_until_table_exists()
        .table_name(name)
        .wait(Duration::from_secs(300))
        .await
        .map_err(|e| {
            StoreError::backend(format!(
                "table {name} did not become active: {}",
                DisplayErrorContext(&e)
            ))
        })?;
    let ttl_enabled = || async {
        let described = client
            .describe_time_to_live()
            .table_name(name)
            .send()
            .await
            .map_err(backend)?;
        let status = described
            .time_to_live_description()
            .and_then(|d| d.time_to_live_status());
        Ok::<_, StoreError>(matches!(
            status,
            Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
        ))
    };
    if !ttl_enabled().await? {
        let enabled = client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name("ttl")
                    .enabled(true)
                    .build()
                    .map_err(backend_build)?,
            )
            .send()
            .await;
        // A concurrent create_tables may have enabled it first.
        if let Err(e) = enabled {
            if !ttl_enabled().await? {
                return Err(backend(e));
            }
        }
    }
    Ok(())
}
