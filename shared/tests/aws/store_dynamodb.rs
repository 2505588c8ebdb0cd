//! The store conformance suite on the DynamoDB adapter, against DynamoDB Local
//! (started by `./scripts/test.sh`, or `start_dynamodb` from
//! `scripts/emulators.sh`, which exports `AWS_ENDPOINT_URL_DYNAMODB`).

use testkit::dynamodb_local;
use testkit::store_conformance;

use std::sync::Arc;

use webhook_core::aws::dynamodb::events::EventRecord;
use webhook_core::aws::dynamodb::DynamoStore;
use webhook_core::ids::{OrgId, SubscriptionId};

/// Every case of this run shares one pair of freshly named tables; each case
/// works in organizations of its own.
async fn store() -> Arc<dyn webhook_core::store::Store> {
    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    Arc::new(DynamoStore::new(client, tables))
}

testkit::conformance_tests!(store());
testkit::secret_conformance_tests!(store());
testkit::listing_conformance_tests!(store());
testkit::expiry_conformance_tests!(store());

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

testkit::history_conformance_tests!(history());

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
        ordered: None,
        rate_limit: None,
        role_arn: None,
        external_id: None,
        payload_filter: None,
        retry_schedule: None,
        custom_headers: None,
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
            ordered: None,
            rate_limit: None,
            role_arn: None,
            external_id: None,
            payload_filter: None,
            retry_schedule: None,
            custom_headers: None,
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

/// A subscription's expiry entry is `EXPIRY#<day>` / `<ms>#<org>#<id>`,
/// moved by a re-post to another expiry and deleted with it; entries whose
/// subscription is gone or has another expiry are skipped.
#[tokio::test]
async fn expiry_entries_follow_their_subscription_and_stale_ones_are_skipped() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use webhook_core::store::{Store, Upsert};
    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    let store = DynamoStore::new(client.clone(), tables.clone());
    let org = unique_org();
    let b = 4_300_000_000_000; // 2106-04-06 12:26:40 UTC
    let upsert = |expires_at: i64| Upsert {
        org_id: org.clone().into(),
        uri: "https://example.com/expiry".into(),
        event_filters: vec![format!("/orgId/{org}/department/d/contact")],
        disabled_filters: vec![],
        expires_at,
        now: 1_000,
        new_id: uuid::Uuid::now_v7().to_string().into(),
        new_secret: "whsec_AAAA".into(),
        max_per_org: 1000,
        ordered: None,
        rate_limit: None,
        role_arn: None,
        external_id: None,
        payload_filter: None,
        retry_schedule: None,
        custom_headers: None,
    };
    let (sub, _) = store.upsert_subscription(upsert(b)).await.unwrap();
    let sk = |at: i64| format!("{at:013}#{org}#{}", sub.id);
    let pk = "EXPIRY#2106-04-06".to_owned();
    let entry = raw_item(&client, &tables.subscriptions, pk.clone(), &sk(b))
        .await
        .expect("the entry");
    assert_eq!(number(&entry, "expiresAt"), b);
    assert_eq!(number(&entry, "ttl"), b / 1000 + 86_400);

    let later = b + 5 * 3_600_000;
    store.upsert_subscription(upsert(later)).await.unwrap();
    assert!(raw_item(&client, &tables.subscriptions, pk.clone(), &sk(b))
        .await
        .is_none());
    assert!(
        raw_item(&client, &tables.subscriptions, pk.clone(), &sk(later))
            .await
            .is_some()
    );

    // Stale entries: one naming a subscription that is gone, one an
    // expiry the subscription no longer has.
    let stale = |sk: String, id: &str, at: i64| {
        client
            .put_item()
            .table_name(&tables.subscriptions)
            .item("pk", AttributeValue::S(pk.clone()))
            .item("sk", AttributeValue::S(sk))
            .item("orgId", AttributeValue::S(org.clone()))
            .item("id", AttributeValue::S(id.into()))
            .item("expiresAt", AttributeValue::N(at.to_string()))
            .send()
    };
    stale(format!("{:013}#{org}#gone", b + 1), "gone", b + 1)
        .await
        .unwrap();
    stale(sk(b + 2), sub.id.as_str(), b + 2).await.unwrap();
    let found = store
        .expiring_subscriptions(b - 1, b + 86_400_000, 10)
        .await
        .unwrap();
    assert_eq!(
        found
            .iter()
            .map(|s| (&s.id, s.expires_at))
            .collect::<Vec<_>>(),
        [(&sub.id, later)]
    );
    assert_eq!(
        store
            .expiring_subscriptions(b - 1, b + 86_400_000, 1)
            .await
            .unwrap()
            .len(),
        1,
        "stale entries do not count against the limit"
    );

    assert!(store
        .delete_subscription(&OrgId::from(&org), &sub.id)
        .await
        .unwrap());
    assert!(raw_item(&client, &tables.subscriptions, pk, &sk(later))
        .await
        .is_none());
}

fn sample_message(id: &str) -> webhook_core::model::Message {
    webhook_core::model::Message {
        id: id.into(),
        owner: None,
        time: None,
        direction: "in".into(),
        to: vec!["+15550100".into()],
        from: "+15550199".into(),
        text: "personal data".into(),
        media: vec![],
        attachments: vec![],
    }
}

fn unique_org() -> String {
    format!("org-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

/// The raw item at (pk, sk) of the messages table.
async fn raw_item(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: String,
    sk: &str,
) -> Option<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
    use aws_sdk_dynamodb::types::AttributeValue;
    client
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(pk))
        .key("sk", AttributeValue::S(sk.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
}

fn number(
    item: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
    name: &str,
) -> i64 {
    item[name].as_n().unwrap().parse().unwrap()
}

/// A message is one item under `MSG#<org>#<id>` with its receipt time and a
/// `ttl` one retention later; an event record one under `EVENT#<org>#<id>`;
/// nothing is written under the organization's `ORG#<org>` partition.
#[tokio::test]
async fn messages_and_event_records_are_keyed_by_their_own_id() {
    use webhook_core::store::Store;
    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    let store = DynamoStore::new(client.clone(), tables.clone())
        .with_message_retention(std::time::Duration::from_secs(7 * 86_400));
    let org = unique_org();
    let at = chrono::Utc::now().timestamp_millis();
    store
        .put_message(&OrgId::from(&org), &sample_message("m-1"), at)
        .await
        .unwrap();
    let item = raw_item(&client, &tables.messages, format!("MSG#{org}#m-1"), "M")
        .await
        .expect("the message under its own key");
    assert_eq!(number(&item, "receivedAt"), at);
    assert_eq!(number(&item, "ttl"), at / 1000 + 7 * 86_400);
    assert_eq!(item["orgId"].as_s().unwrap(), &org);

    let org_id = OrgId::from(&org);
    assert_eq!(
        store.event_record(&org_id, "evt-1").await.unwrap(),
        EventRecord::Absent
    );
    // A failed ingestion leaves its first acceptance time; the ingested record replaces it
    // and is never replaced by a partial one.
    let expires = at / 1000 + 86_400;
    store
        .record_partial_event(&org_id, "evt-1", at, expires)
        .await
        .unwrap();
    assert_eq!(
        store.event_record(&org_id, "evt-1").await.unwrap(),
        EventRecord::Partial { accepted_at: at }
    );
    store.record_event(&org_id, "evt-1", expires).await.unwrap();
    assert_eq!(
        store.event_record(&org_id, "evt-1").await.unwrap(),
        EventRecord::Done
    );
    store
        .record_partial_event(&org_id, "evt-1", at + 1, expires)
        .await
        .unwrap();
    assert_eq!(
        store.event_record(&org_id, "evt-1").await.unwrap(),
        EventRecord::Done
    );
    assert_eq!(
        store
            .event_record(&OrgId::from(unique_org()), "evt-1")
            .await
            .unwrap(),
        EventRecord::Absent,
        "the same event id in another organization is another event"
    );
    assert!(
        raw_item(&client, &tables.messages, format!("EVENT#{org}#evt-1"), "E")
            .await
            .is_some()
    );
    let under_org = client
        .query()
        .table_name(&tables.messages)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(
            ":pk",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("ORG#{org}")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        under_org.count(),
        0,
        "nothing in the organization's partition"
    );
}

/// DynamoDB deletes expired items only eventually: a message past its
/// retention is still in the table, and the endpoint answers 404 anyway.
#[tokio::test]
async fn a_message_past_its_retention_is_404_while_dynamodb_still_holds_it() {
    use webhook_core::api::messages::get_message;
    use webhook_core::auth::Caller;
    use webhook_core::clock::ManualClock;
    use webhook_core::store::Store;
    use webhook_core::{App, Config, Profile};

    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    let store = std::sync::Arc::new(DynamoStore::new(client.clone(), tables.clone()));
    let clock = ManualClock::at(chrono::Utc::now().timestamp_millis());
    let config = Config::from_lookup(Profile::Lambda, |_| None).unwrap();
    let app = App::new(config, store.clone()).with_clock(clock.clone());
    let org = unique_org();
    let caller = Caller {
        org_id: org.clone().into(),
        subject: None,
        scopes: vec![],
    };
    store
        .put_message(&caller.org_id, &sample_message("m-1"), app.now_ms())
        .await
        .unwrap();
    clock.advance(std::time::Duration::from_secs(29 * 86_400));
    assert_eq!(
        get_message(&app, &caller, &"m-1".into())
            .await
            .unwrap()
            .text,
        "personal data"
    );
    clock.advance(std::time::Duration::from_secs(2 * 86_400));
    let gone = get_message(&app, &caller, &"m-1".into()).await.unwrap_err();
    assert_eq!(
        (gone.status.as_u16(), gone.code.as_str()),
        (404, "MESSAGE_NOT_FOUND")
    );
    assert!(
        raw_item(&client, &tables.messages, format!("MSG#{org}#m-1"), "M")
            .await
            .is_some(),
        "the item itself is left to TTL"
    );
}

/// A message written under the old `ORG#<org>` / `MSG#<id>` key is still
/// found (by its organization only) until the migration dates it; after
/// that it follows the retention like any other, and a second run is a no-op.
#[tokio::test]
async fn old_key_messages_are_found_then_dated_by_the_migration() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use webhook_core::store::Store;
    let (client, tables) = dynamodb_local::fresh_tables("legacy").await;
    let store = DynamoStore::new(client.clone(), tables.clone());
    let org = unique_org();
    let old = |s: &str| AttributeValue::S(s.into());
    client
        .put_item()
        .table_name(&tables.messages)
        .item("pk", old(&format!("ORG#{org}")))
        .item("sk", old("MSG#m-old"))
        .item("orgId", old(&org))
        .item("id", old("m-old"))
        .item("owner", AttributeValue::Null(true))
        .item("time", AttributeValue::Null(true))
        .item("direction", old("in"))
        .item("to", AttributeValue::L(vec![old("+15550100")]))
        .item("from", old("+15550199"))
        .item("text", old("personal data"))
        .item("media", AttributeValue::L(vec![]))
        .item("attachments", AttributeValue::L(vec![]))
        .send()
        .await
        .unwrap();
    // An old event record is left alone (it expires by its own ttl).
    client
        .put_item()
        .table_name(&tables.messages)
        .item("pk", old(&format!("ORG#{org}")))
        .item("sk", old("EVENT#evt-old"))
        .item("ttl", AttributeValue::N("4000000000".into()))
        .send()
        .await
        .unwrap();
    let now = chrono::Utc::now().timestamp_millis();
    let org_id = OrgId::from(&org);
    assert_eq!(
        store.get_message(&org_id, "m-old", now).await.unwrap(),
        Some(sample_message("m-old")),
        "found under the old key, undated: kept"
    );
    assert_eq!(
        store
            .get_message(&OrgId::from(unique_org()), "m-old", now)
            .await
            .unwrap(),
        None
    );

    assert_eq!(store.migrate_legacy_messages(now).await.unwrap(), 1);
    let item = raw_item(&client, &tables.messages, format!("ORG#{org}"), "MSG#m-old")
        .await
        .unwrap();
    assert_eq!(number(&item, "receivedAt"), now);
    assert_eq!(number(&item, "ttl"), now / 1000 + 30 * 86_400);
    assert!(store
        .get_message(&org_id, "m-old", now)
        .await
        .unwrap()
        .is_some());
    assert_eq!(
        store.get_message(&org_id, "m-old", now + 1).await.unwrap(),
        None,
        "dated: past the retention like any other"
    );
    assert_eq!(store.migrate_legacy_messages(now + 5).await.unwrap(), 0);

    // A message stored again after the upgrade is read under its new key.
    let mut renewed = sample_message("m-old");
    renewed.text = "new".into();
    store
        .put_message(&org_id, &renewed, now + 10)
        .await
        .unwrap();
    assert_eq!(
        store.get_message(&org_id, "m-old", now + 1).await.unwrap(),
        Some(renewed)
    );
}

/// Short attempts are kept inline in the summary (one write for the update
/// and the attempt), at most two; a long answer, and any attempt after the
/// second inline one, gets an item of its own. The detail shows every
/// attempt, oldest first, wherever it is kept.
#[tokio::test]
async fn attempts_inline_and_in_items_read_back_in_order() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use webhook_core::history::{
        AttemptRecord, DeliveryHistory, NotificationStatus, Outcome, Trigger,
    };
    use webhook_core::queue::DeliveryJob;
    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    let h = DynamoStore::new(client.clone(), tables.clone())
        .with_retention(std::time::Duration::from_secs(100 * 365 * 86_400));
    let org: OrgId = format!("org-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]).into();
    let sub: SubscriptionId = uuid::Uuid::now_v7().to_string().into();
    let id = uuid::Uuid::new_v4().to_string();
    let t0 = 1_760_000_000_000;
    let job = DeliveryJob {
        id: id.clone().into(),
        org_id: org.clone(),
        subscription_id: sub.clone(),
        body: format!(r#"{{"uuid":"{id}"}}"#),
        created_at: t0,
        trigger: Trigger::Scheduled,
        attempts: 0,
        not_before: None,
        traceparent: None,
        ordered: false,
        history_attempts: 0,
    };
    h.record_enqueued("event-1", std::slice::from_ref(&job))
        .await
        .unwrap();
    let answers = [
        "x".repeat(500),
        "short".into(),
        String::new(),
        "late".into(),
    ];
    for (i, body) in answers.iter().enumerate() {
        let last = i == answers.len() - 1;
        let outcome = Outcome {
            status: match last {
                true => NotificationStatus::Delivered,
                false => NotificationStatus::Pending,
            },
            next_attempt_at: (!last).then_some(t0 + 1_000 * (i as i64 + 2)),
            attempt: Some(AttemptRecord {
                at: t0 + 1_000 * (i as i64 + 1),
                duration_ms: 7,
                http_status: Some(if last { 200 } else { 503 }),
                code: (!last).then(|| "BAD_STATUS".to_owned()),
                response_body: body.clone(),
                trigger: Trigger::Scheduled,
            }),
            code: None,
        };
        h.record_outcome(&job, &outcome).await.unwrap();
    }
    let detail = h
        .get(&org, &sub, &id.clone().into())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(detail.summary.attempts, 4);
    assert_eq!(detail.summary.status, NotificationStatus::Delivered);
    let bodies: Vec<&str> = detail
        .attempts
        .iter()
        .map(|a| a.response_body.as_str())
        .collect();
    assert_eq!(bodies, ["x".repeat(500).as_str(), "short", "", "late"]);
    assert_eq!(detail.attempts[3].http_status, Some(200));
    assert!(detail.attempts[3].succeeded());
    assert_eq!(detail.attempts[1].code.as_deref(), Some("BAD_STATUS"));

    // Two inline (the short ones), two items (the long one, and the one past the cap).
    let items = client
        .query()
        .table_name(&tables.messages)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", AttributeValue::S(format!("NOTIF#{org}#{id}")))
        .send()
        .await
        .unwrap();
    let attempt_items = items
        .items()
        .iter()
        .filter(|i| matches!(i.get("sk"), Some(AttributeValue::S(sk)) if sk.starts_with("A#")))
        .count();
    assert_eq!(attempt_items, 2);
}

/// An unknown status planted on the item is refused as corrupt, named by
/// its key (the same case as `store_sqlite.rs`).
#[tokio::test]
async fn an_unknown_stored_status_is_corrupt() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    let store = Arc::new(DynamoStore::new(client.clone(), tables.clone()));
    store_conformance::corrupt::an_unknown_stored_status_is_corrupt(
        store,
        |org, id, status| async move {
            client
                .update_item()
                .table_name(&tables.subscriptions)
                .key("pk", AttributeValue::S(format!("ORG#{org}")))
                .key("sk", AttributeValue::S(format!("SUB#{id}")))
                .update_expression("SET #s = :s")
                .expression_attribute_names("#s", "status")
                .expression_attribute_values(":s", AttributeValue::S(status.into()))
                .send()
                .await
                .unwrap();
        },
    )
    .await;
}

/// Issue 39: the fan-out read is strongly consistent, so an event ingested
/// after a create has answered sees the new subscription. DynamoDB Local
/// answers every read consistently, so the request itself is checked: each
/// `Query` of the filter index asks for `ConsistentRead`.
#[tokio::test]
async fn the_fan_out_query_is_strongly_consistent() {
    use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
    use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
    use std::sync::Mutex;
    use webhook_core::store::{Store, Upsert};

    /// The bodies of the `Query` requests sent.
    #[derive(Debug, Default, Clone)]
    struct Queries(Arc<Mutex<Vec<serde_json::Value>>>);

    impl Intercept for Queries {
        fn name(&self) -> &'static str {
            "Queries"
        }

        fn read_before_transmit(
            &self,
            context: &BeforeTransmitInterceptorContextRef<'_>,
            _: &RuntimeComponents,
            _: &mut ConfigBag,
        ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
            let request = context.request();
            let query = request
                .headers()
                .get("x-amz-target")
                .is_some_and(|t| t.ends_with(".Query"));
            if let (true, Some(body)) = (query, request.body().bytes()) {
                self.0.lock().unwrap().push(serde_json::from_slice(body)?);
            }
            Ok(())
        }
    }

    let (client, tables) = dynamodb_local::tables_for_this_run().await;
    let queries = Queries::default();
    let config = client
        .config()
        .to_builder()
        .interceptor(queries.clone())
        .build();
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::from_conf(config), tables);
    let org = format!("org-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let filter = format!("/orgId/{org}/department/d/contact");
    store
        .upsert_subscription(Upsert {
            org_id: org.clone().into(),
            uri: "https://example.com/consistent".into(),
            event_filters: vec![filter.clone()],
            disabled_filters: vec![],
            expires_at: 9_000_000_000_000,
            now: 1_000,
            new_id: uuid::Uuid::now_v7().to_string().into(),
            new_secret: "whsec_AAAA".into(),
            max_per_org: 1000,
            ordered: None,
            rate_limit: None,
            role_arn: None,
            external_id: None,
            payload_filter: None,
            retry_schedule: None,
            custom_headers: None,
        })
        .await
        .unwrap();
    queries.0.lock().unwrap().clear();
    let found = store.subscriptions_for_filter(&filter).await.unwrap();
    assert_eq!(found.len(), 1);
    let sent = queries.0.lock().unwrap().clone();
    assert!(!sent.is_empty(), "the fan-out is a Query");
    for query in &sent {
        assert_eq!(query["ConsistentRead"], true, "{query}");
    }
}
