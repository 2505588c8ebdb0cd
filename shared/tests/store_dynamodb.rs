//! The store conformance suite on the DynamoDB adapter, against DynamoDB Local
//! (started by `./scripts/test.sh`, or `start_dynamodb` from
//! `scripts/emulators.sh`, which exports `AWS_ENDPOINT_URL_DYNAMODB`).

mod conformance;
mod dynamodb_local;

use std::sync::Arc;

use webhook_core::aws::dynamodb::DynamoStore;
use webhook_core::ids::{OrgId, SubscriptionId};

/// Every case of this run shares one pair of freshly named tables; each case
/// works in organizations of its own.
async fn store() -> Arc<dyn webhook_core::store::Store> {
    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    Arc::new(DynamoStore::new(client, tables))
}

conformance_tests!(store());
secret_conformance_tests!(store());

/// The suite's times are in 2025 (`T0`): with the default 30 days the items'
/// `ttl` would be past, and DynamoDB Local deletes expired items while a case
/// runs. A century keeps them.
async fn history() -> Arc<dyn webhook_core::history::DeliveryHistory> {
    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    Arc::new(
        DynamoStore::new(client, tables)
            .with_retention(std::time::Duration::from_secs(100 * 365 * 86_400)),
    )
}

history_conformance_tests!(history());

#[tokio::test]
async fn creating_tables_twice_is_harmless() {
    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    webhook_core::aws::dynamodb::create_tables(&client, &tables)
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

/// A guard whose subscription is gone (removed by hand, say) does not block
/// the uri for ever: the next upsert replaces it.
#[tokio::test]
async fn a_dangling_uniqueness_guard_is_replaced() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use webhook_core::store::{Store, Upsert};
    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    let store = DynamoStore::new(client.clone(), tables.clone());
    let org = format!("org-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let upsert = |id: &str| Upsert {
        org_id: org.clone().into(),
        uri: "https://example.com/dangling".into(),
        event_filters: vec![format!("/orgId/{org}/department/d/contact")],
        disabled_filters: vec![],
        expires_at: 9_000_000_000_000,
        now: 1_000,
        new_id: id.into(),
        new_secret: "whsec_AAAA".into(),
        max_per_org: 1000,
    };
    let (first, _) = store.upsert_subscription(upsert("first")).await.unwrap();
    client
        .delete_item()
        .table_name(&tables.subscriptions)
        .key("pk", AttributeValue::S(format!("ORG#{org}")))
        .key("sk", AttributeValue::S(format!("SUB#{}", first.id)))
        .send()
        .await
        .unwrap();
    let (second, created) = store.upsert_subscription(upsert("second")).await.unwrap();
    assert!(created);
    assert_eq!(second.id, "second");
    assert_eq!(
        store
            .get_subscription(&OrgId::from(&org), &SubscriptionId::from("second"))
            .await
            .unwrap(),
        Some(second)
    );
}

/// TTL removes index entries of expired subscriptions; delivery bookkeeping
/// still works and keeps the entries that remain in step.
#[tokio::test]
async fn delivery_records_survive_index_entries_removed_by_ttl() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use webhook_core::model::SubscriptionStatus;
    use webhook_core::store::{DeliveryRecord, Store, Upsert};
    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    let store = DynamoStore::new(client.clone(), tables.clone());
    let org = format!("org-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let (kept, expired) = (
        format!("/orgId/{org}/department/d1/contact"),
        format!("/orgId/{org}/department/d2/contact"),
    );
    let (sub, _) = store
        .upsert_subscription(Upsert {
            org_id: org.clone().into(),
            uri: "https://example.com/ttl".into(),
            event_filters: vec![kept.clone(), expired.clone()],
            disabled_filters: vec![],
            expires_at: 9_000_000_000_000,
            now: 1_000,
            new_id: uuid::Uuid::now_v7().to_string().into(),
            new_secret: "whsec_AAAA".into(),
            max_per_org: 1000,
        })
        .await
        .unwrap();
    client
        .delete_item()
        .table_name(&tables.subscriptions)
        .key("pk", AttributeValue::S(format!("FILTER#{expired}")))
        .key("sk", AttributeValue::S(format!("SUB#{}", sub.id)))
        .send()
        .await
        .unwrap();
    assert_eq!(
        store
            .record_delivery(&OrgId::from(&org), &sub.id, DeliveryRecord::Gone)
            .await
            .unwrap(),
        Some(SubscriptionStatus::Blacklisted)
    );
    let via_index = store.subscriptions_for_filter(&kept).await.unwrap();
    assert_eq!(via_index.len(), 1);
    assert_eq!(via_index[0].status, SubscriptionStatus::Blacklisted);
    assert!(store
        .subscriptions_for_filter(&expired)
        .await
        .unwrap()
        .is_empty());
}
