//! Lists paged in the DynamoDB store, against DynamoDB Local: the repair of
//! organizations whose subscriptions predate the list entries, and the read
//! units a page costs (`ReturnConsumedCapacity`, asked for on every call by
//! an SDK interceptor; docs/performance-history.md#lists-paged-in-the-store-issue-15).
//! The cross-adapter cases are in `conformance/listing.rs`.

use testkit::dynamodb_local;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::interceptors::{
    AfterDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextMut,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use serde_json::Value;
use webhook_core::aws::dynamodb::DynamoStore;
use webhook_core::ids::OrgId;
use webhook_core::page::PageRequest;
use webhook_core::store::order::SORTABLE;
use webhook_core::store::{Store, Upsert};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Capacity units consumed, per DynamoDB action.
#[derive(Debug, Default, Clone)]
struct Units(Arc<Mutex<BTreeMap<String, f64>>>);

impl Units {
    fn take(&self) -> BTreeMap<String, f64> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    fn total(units: &BTreeMap<String, f64>) -> f64 {
        units.values().sum()
    }
}

/// Adds `"ReturnConsumedCapacity": "TOTAL"` to every request that takes it
/// and sums the `ConsumedCapacity` of the answers. The metered store makes
/// one call at a time, so the action of an answer is the last one sent.
#[derive(Debug)]
struct Meter(Units, Mutex<String>);

const METERED: &[&str] = &[
    "GetItem",
    "Query",
    "Scan",
    "BatchGetItem",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "BatchWriteItem",
    "TransactWriteItems",
    "TransactGetItems",
];

fn action(headers: &aws_sdk_dynamodb::config::http::HttpRequest) -> Option<String> {
    let target = headers.headers().get("x-amz-target")?;
    Some(target.rsplit('.').next()?.to_owned())
}

impl Intercept for Meter {
    fn name(&self) -> &'static str {
        "ConsumedCapacityMeter"
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let request = context.request_mut();
        let Some(action) = action(request) else {
            return Ok(());
        };
        if !METERED.contains(&action.as_str()) {
            return Ok(());
        }
        *self.1.lock().unwrap() = action;
        let Some(body) = request.body().bytes() else {
            return Ok(());
        };
        let mut json: Value = serde_json::from_slice(body)?;
        json["ReturnConsumedCapacity"] = Value::from("TOTAL");
        let bytes = serde_json::to_vec(&json)?;
        request
            .headers_mut()
            .insert("content-length", bytes.len().to_string());
        *request.body_mut() = bytes.into();
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(body) = context.response().body().bytes() else {
            return Ok(());
        };
        let Ok(json) = serde_json::from_slice::<Value>(body) else {
            return Ok(());
        };
        let consumed = match &json["ConsumedCapacity"] {
            Value::Array(all) => all.iter().filter_map(|c| c["CapacityUnits"].as_f64()).sum(),
            one => one["CapacityUnits"].as_f64().unwrap_or(0.0),
        };
        if consumed > 0.0 {
            let action = self.1.lock().unwrap().clone();
            *self.0 .0.lock().unwrap().entry(action).or_default() += consumed;
        }
        Ok(())
    }
}

fn metered(client: &Client) -> (Client, Units) {
    let units = Units::default();
    let config = client
        .config()
        .to_builder()
        .interceptor(Meter(units.clone(), Mutex::default()))
        .build();
    (Client::from_conf(config), units)
}

fn org() -> String {
    format!("org-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

fn upsert(org: &str, i: usize) -> Upsert {
    Upsert {
        org_id: org.to_owned().into(),
        uri: format!("https://hooks.example.com/webhooks/receiver-{i:04}"),
        event_filters: vec![format!(
            "/orgId/{org}/department/dep-{}/message?direction=inbound",
            i % 10
        )],
        disabled_filters: vec![],
        expires_at: 9_000_000_000_000,
        now: 1_700_000_000_000 + i as i64,
        new_id: uuid::Uuid::now_v7().to_string().into(),
        new_secret: webhook_core::secret::new_signing_secret(),
        max_per_org: 1000,
        ordered: None,
        rate_limit: None,
        role_arn: None,
        external_id: None,
        payload_filter: None,
        retry_schedule: None,
        custom_headers: None,
    }
}

async fn create(store: &Arc<DynamoStore>, org: &str, n: usize) {
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..8 {
        let (store, org) = (store.clone(), org.to_owned());
        tasks.spawn(async move {
            for i in (worker..n).step_by(8) {
                store.upsert_subscription(upsert(&org, i)).await.unwrap();
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

fn page(query: &str) -> PageRequest {
    PageRequest::from_query(Some(query), SORTABLE).unwrap()
}

async fn ids(store: &DynamoStore, org: &str, query: &str) -> (u64, Vec<String>) {
    let p = store
        .list_subscriptions(&OrgId::from(org), &page(query), 0)
        .await
        .unwrap();
    (
        p.total_elements,
        p.content.iter().map(|s| s.id.to_string()).collect(),
    )
}

/// Subscriptions written before the list entries (simulated by removing
/// the entries and the counter's `listed`) are listed by a full read, which
/// writes their entries; the next list reads the entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn organizations_from_before_the_entries_are_repaired_by_their_first_list() {
    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    let store = Arc::new(DynamoStore::new(client.clone(), tables.clone()));
    let org = org();
    create(&store, &org, 30).await;
    let (total, expected) = ids(&store, &org, "size=2000&sort=createdDateTime,desc").await;
    assert_eq!(total, 30);
    let mut expected_ascending = expected.clone();
    expected_ascending.reverse();
    // Make it look like data from before the entries.
    let pk = AttributeValue::S(format!("ORG#{org}"));
    let entries = client
        .query()
        .table_name(&tables.subscriptions)
        .key_condition_expression("pk = :pk AND begins_with(sk, :c)")
        .expression_attribute_values(":pk", pk.clone())
        .expression_attribute_values(":c", AttributeValue::S("CREATED#".into()))
        .send()
        .await
        .unwrap();
    assert_eq!(entries.items().len(), 30, "one entry per subscription");
    for entry in entries.items().iter().take(20) {
        client
            .delete_item()
            .table_name(&tables.subscriptions)
            .key("pk", pk.clone())
            .key("sk", entry["sk"].clone())
            .send()
            .await
            .unwrap();
    }
    client
        .update_item()
        .table_name(&tables.subscriptions)
        .key("pk", pk.clone())
        .key("sk", AttributeValue::S("COUNT".into()))
        .update_expression("REMOVE listed")
        .send()
        .await
        .unwrap();
    let (metered_client, units) = metered(&client);
    let watched = DynamoStore::new(metered_client, tables.clone());
    // The first list reads everything and repairs; answers are right.
    assert_eq!(
        ids(&watched, &org, "size=7&page=1").await,
        (30, expected_ascending[7..14].to_vec())
    );
    let repair = units.take();
    assert!(
        repair.contains_key("TransactWriteItems"),
        "the missing entries were written: {repair:?}"
    );
    // The next ones read the entries (pages of at most 3: a page more than
    // an eighth of the organization reads it whole, which is cheaper).
    for (number, size) in [(0, 1), (29, 1), (0, 3), (9, 3), (4, 2), (1, 30), (0, 2000)] {
        let want: Vec<String> = expected_ascending
            .iter()
            .skip(number * size)
            .take(size)
            .cloned()
            .collect();
        assert_eq!(
            ids(&watched, &org, &format!("size={size}&page={number}")).await,
            (30, want)
        );
    }
    let (_, newest) = ids(&watched, &org, "size=3&page=1&sort=createdDateTime,desc").await;
    assert_eq!(
        newest,
        expected[3..6].to_vec(),
        "backwards through the entries"
    );
    let after = units.take();
    assert!(
        !after.contains_key("TransactWriteItems") && after.contains_key("BatchGetItem"),
        "{after:?}"
    );
}

/// Read units of one page of 20 out of 1,000 subscriptions, in creation
/// order (pages 0, 10, 49) and sorted by uri. `--nocapture` prints them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_units_of_a_page_of_20_out_of_1000() {
    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    let store = Arc::new(DynamoStore::new(client.clone(), tables.clone()));
    let org = org();
    create(&store, &org, 1000).await;
    let (metered_client, units) = metered(&client);
    let watched = DynamoStore::new(metered_client, tables);
    let mut cost = BTreeMap::new();
    for (label, query) in [
        (
            "first list of the organization (marks it listed)",
            "page=0&size=20",
        ),
        ("creation order, page 0", "page=0&size=20"),
        ("creation order, page 10", "page=10&size=20"),
        ("creation order, page 49", "page=49&size=20"),
        ("creation order, page 50 (past the end)", "page=50&size=20"),
        ("sort=uri, page 0", "page=0&size=20&sort=uri"),
        ("sort=uri, page 49", "page=49&size=20&sort=uri"),
    ] {
        units.take();
        let (total, got) = ids(&watched, &org, query).await;
        assert_eq!(total, 1000);
        assert_eq!(got.len(), if query.starts_with("page=50") { 0 } else { 20 });
        let used = units.take();
        println!(
            "{label:<52} {:>7.1} read units  {used:?}",
            Units::total(&used)
        );
        cost.insert(label, Units::total(&used));
    }
    let full = cost["sort=uri, page 0"];
    assert!(
        cost["creation order, page 0"] * 3.0 < full,
        "a page in creation order costs a fraction of the whole organization: {cost:?}"
    );
    assert!(cost["creation order, page 49"] < full, "{cost:?}");
}
