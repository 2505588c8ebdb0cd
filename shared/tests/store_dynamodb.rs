//! The store conformance suite on the DynamoDB adapter, against DynamoDB Local
//! (started by `./scripts/test.sh`, or `start_dynamodb` from
//! `scripts/emulators.sh`, which exports `AWS_ENDPOINT_URL_DYNAMODB`).

mod conformance;
mod dynamodb_local;

use std::sync::Arc;

use webhook_core::store::dynamodb::DynamoStore;

/// Every case of this run shares one pair of freshly named tables; each case
/// works in organizations of its own.
async fn store() -> Arc<dyn webhook_core::store::Store> {
    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    Arc::new(DynamoStore::new(client, tables))
}

conformance_tests!(store());

#[tokio::test]
async fn creating_tables_twice_is_harmless() {
    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    webhook_core::store::dynamodb::create_tables(&client, &tables)
        .await
        .expect("second create_tables");
    let described = client
        .describe_time_to_live()
        .table_name(&tables.subscriptions)
        .send()
        .await
        .unwrap();
    let ttl = described.time_to_live_description().unwrap();
    assert_eq!(ttl.attribute_name(), Some("ttl"));
}
