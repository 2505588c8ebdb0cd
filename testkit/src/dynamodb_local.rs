//! DynamoDB Local for tests: a client on `AWS_ENDPOINT_URL_DYNAMODB` and
//! freshly named tables. A missing endpoint is a failure, never a skip.

use std::sync::OnceLock;

use aws_sdk_dynamodb::Client;
use webhook_core::aws::dynamodb::{client_from_env, create_tables, Tables};

/// A client for DynamoDB Local. Panics with instructions when the emulator
/// is not configured, so a run without it fails instead of passing vacuously.
pub async fn client() -> Client {
    crate::emulators::require(crate::emulators::DYNAMODB);
    client_from_env().await
}

/// Table names no other test uses.
pub fn unique_tables(label: &str) -> Tables {
    let run = crate::emulators::unique_name(&format!("webhooks-test-{label}"));
    Tables {
        subscriptions: format!("{run}-subscriptions"),
        messages: format!("{run}-messages"),
    }
}

/// One pair of tables for the whole test process, created on first use
/// (`create_tables` is idempotent, so concurrent first uses are fine).
pub async fn tables_for_this_run() -> (Client, Tables) {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    let tables = TABLES.get_or_init(|| unique_tables("run")).clone();
    let client = client().await;
    create_tables(&client, &tables)
        .await
        .unwrap_or_else(|e| panic!("creating {tables:?} on DynamoDB Local: {e}"));
    (client, tables)
}

/// Fresh tables of their own (for tests that need empty tables).
pub async fn fresh_tables(label: &str) -> (Client, Tables) {
    let tables = unique_tables(label);
    let client = client().await;
    create_tables(&client, &tables)
        .await
        .unwrap_or_else(|e| panic!("creating {tables:?} on DynamoDB Local: {e}"));
    (client, tables)
}
