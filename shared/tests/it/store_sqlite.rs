//! The store conformance suite on the SQLite adapter, on a real file.

use testkit::store_conformance;

use std::sync::Arc;

use webhook_core::ids::OrgId;
use webhook_core::sqlite::SqliteDb;

async fn store() -> Arc<dyn webhook_core::store::Store> {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteDb::open(&dir.path().join("conformance.db")).unwrap();
    // The file must outlive the test; the OS temp dir is cleaned up eventually.
    std::mem::forget(dir);
    Arc::new(store)
}

testkit::conformance_tests!(store());
testkit::secret_conformance_tests!(store());
testkit::listing_conformance_tests!(store());
testkit::expiry_conformance_tests!(store());

async fn history() -> Arc<dyn webhook_core::history::DeliveryHistory> {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteDb::open(&dir.path().join("history.db")).unwrap();
    std::mem::forget(dir);
    Arc::new(store)
}

testkit::history_conformance_tests!(history());

#[tokio::test]
async fn reopening_a_file_keeps_its_data_and_schema() {
    use webhook_core::store::Store;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reopen.db");
    let message = webhook_core::model::Message {
        id: "m".into(),
        owner: Some("o".into()),
        time: None,
        direction: "out".into(),
        to: vec![],
        from: "+1".into(),
        text: "t".into(),
        media: vec![],
        attachments: vec![],
    };
    SqliteDb::open(&path)
        .unwrap()
        .put_message(&OrgId::from("org"), &message, 1_000)
        .await
        .unwrap();
    let reopened = SqliteDb::open(&path).unwrap();
    assert_eq!(
        reopened
            .get_message(&OrgId::from("org"), "m", 1_000)
            .await
            .unwrap(),
        Some(message)
    );
}

/// The purge deletes the rows of messages received before the retention's
/// start and keeps the others (read back without a retention bound).
#[tokio::test]
async fn the_purge_deletes_messages_past_their_retention() {
    use webhook_core::store::Store;
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteDb::open(&dir.path().join("purge.db")).unwrap();
    let org = OrgId::from("org");
    let message = |id: &str| webhook_core::model::Message {
        id: id.into(),
        owner: None,
        time: None,
        direction: "in".into(),
        to: vec!["+15550100".into()],
        from: "+15550199".into(),
        text: "personal data".into(),
        media: vec![],
        attachments: vec![],
    };
    db.put_message(&org, &message("old"), 1_000).await.unwrap();
    db.put_message(&org, &message("edge"), 2_000).await.unwrap();
    db.put_message(&org, &message("new"), 5_000).await.unwrap();
    assert_eq!(db.purge_messages(2_000).await.unwrap(), 1);
    assert_eq!(db.get_message(&org, "old", i64::MIN).await.unwrap(), None);
    assert!(db
        .get_message(&org, "edge", i64::MIN)
        .await
        .unwrap()
        .is_some());
    assert!(db
        .get_message(&org, "new", i64::MIN)
        .await
        .unwrap()
        .is_some());
    assert_eq!(
        db.purge_messages(2_000).await.unwrap(),
        0,
        "nothing left to purge"
    );
}

/// An unknown value planted in the file (by hand, by a newer version) is
/// refused as corrupt, named by its row, by every read: never decoded as
/// a default status or trigger.
#[tokio::test]
async fn unknown_stored_values_are_corrupt_and_named() {
    use webhook_core::history::DeliveryHistory;
    use webhook_core::ids::{NotificationId, SubscriptionId};
    use webhook_core::page::PageRequest;
    use webhook_core::queue::{DeliveryJob, Outbox};
    use webhook_core::store::{DeliveryRecord, Store, StoreError};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("corrupt.db");
    let db = Arc::new(SqliteDb::open(&path).unwrap());
    let raw = rusqlite::Connection::open(&path).unwrap();
    let plant = |sql: &str, id: &str| {
        assert_eq!(raw.execute(sql, [id]).unwrap(), 1, "{sql}");
    };
    store_conformance::corrupt::an_unknown_stored_status_is_corrupt(db.clone(), |_, id, status| {
        plant(
            &format!("UPDATE subscriptions SET status = '{status}' WHERE id = ?1"),
            id.as_str(),
        );
        async {}
    })
    .await;
    let corrupt = |what: &str, got: Result<String, StoreError>, key: &str| match got {
        Err(StoreError::Corrupt { key: k, problem }) => {
            assert_eq!(k, key, "{what}: {problem}");
        }
        other => panic!("{what}: {other:?}"),
    };

    // The other reads of a subscription: a list page, the fan-out, the
    // delivery bookkeeping.
    let org = OrgId::from("org-c");
    let filter = "/orgId/org-c/department/d/contact";
    let mut upsert = webhook_core::store::Upsert {
        org_id: org.clone(),
        uri: "https://cb.example/c".into(),
        event_filters: vec![filter.into()],
        disabled_filters: vec![],
        expires_at: 9_000_000_000_000,
        now: 1_000,
        new_id: SubscriptionId::from("sub-c"),
        new_secret: webhook_core::secret::new_signing_secret(),
        max_per_org: 10,
        ordered: None,
        rate_limit: None,
        role_arn: None,
        external_id: None,
        payload_filter: None,
        retry_schedule: None,
        custom_headers: None,
    };
    db.upsert_subscription(upsert.clone()).await.unwrap();
    plant(
        "UPDATE subscriptions SET status = 'PAUSED' WHERE id = ?1",
        "sub-c",
    );
    let key = "subscriptions/sub-c";
    let page = PageRequest::from_query(None, webhook_core::store::order::SORTABLE).unwrap();
    corrupt(
        "list",
        db.list_subscriptions(&org, &page, 2_000)
            .await
            .map(|p| format!("{p:?}")),
        key,
    );
    corrupt(
        "fan-out",
        db.subscriptions_for_filter(filter)
            .await
            .map(|s| format!("{s:?}")),
        key,
    );
    let record = db.record_delivery(&org, &upsert.new_id, DeliveryRecord::Succeeded);
    corrupt("record", record.await.map(|s| format!("{s:?}")), key);

    // A notification's status and its attempt log.
    upsert.uri = "https://cb.example/n".into();
    upsert.new_id = SubscriptionId::from("sub-n");
    db.upsert_subscription(upsert).await.unwrap();
    let id = NotificationId::from("n-1");
    let job = DeliveryJob::new(id.clone(), org.clone(), "sub-n".into(), "{}".into(), 1_500);
    assert!(db.commit(&org, "evt-1", None, vec![job]).await.unwrap());
    let read = || async {
        db.get(&org, &"sub-n".into(), &id)
            .await
            .map(|d| format!("{d:?}"))
    };
    assert!(read().await.is_ok(), "a sound row reads");
    plant(
        "UPDATE notifications SET status = 'LOST' WHERE id = ?1",
        "n-1",
    );
    corrupt("notification status", read().await, "notifications/n-1");
    plant("UPDATE notifications SET status = 'PENDING', attempt_log = '[{\"trigger\":\"LATER\"}]' WHERE id = ?1", "n-1");
    corrupt("attempt log", read().await, "notifications/n-1");
}

/// An upsert of subscription `id` of `org` with `filters` at `now`, at
/// `https://cb.example/{id}`.
fn upsert(org: &OrgId, id: &str, filters: Vec<String>, now: i64) -> webhook_core::store::Upsert {
    webhook_core::store::Upsert {
        org_id: org.clone(),
        uri: format!("https://cb.example/{id}"),
        event_filters: filters,
        disabled_filters: vec![],
        expires_at: 9_000_000_000_000,
        now,
        new_id: id.into(),
        new_secret: webhook_core::secret::new_signing_secret(),
        max_per_org: 10,
        ordered: None,
        rate_limit: None,
        role_arn: None,
        external_id: None,
        payload_filter: None,
        retry_schedule: None,
        custom_headers: None,
    }
}

/// Polls `read` until it answers `want`: a change another process made to
/// the file is seen within the read cache's 250 ms (10 s allowed).
async fn seen_soon<T: PartialEq + std::fmt::Debug, F: std::future::Future<Output = T>>(
    read: impl Fn() -> F,
    want: T,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let got = read().await;
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "another process's change was never seen: {got:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A subscription read by id is kept in memory (`sqlite/read_cache.rs`)
/// only until a write: a get after this process's write sees it at once,
/// another organization never sees it, and a change another process makes
/// to the file is seen within the cache's 250 ms.
#[tokio::test]
async fn a_get_sees_each_write_at_once_and_another_processs_soon() {
    use webhook_core::ids::SubscriptionId;
    use webhook_core::store::Store;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("points.db");
    let db = SqliteDb::open(&path).unwrap();
    let org = OrgId::from("org-p");
    let id = SubscriptionId::from("sub-p");
    let filter = |d: &str| format!("/orgId/org-p/department/{d}/contact");
    let get = || async { db.get_subscription(&org, &id).await.unwrap() };

    db.upsert_subscription(upsert(&org, "sub-p", vec![filter("a")], 1_000))
        .await
        .unwrap();
    assert_eq!(get().await.unwrap().event_filters, vec![filter("a")]);
    assert_eq!(get().await.unwrap().event_filters, vec![filter("a")]);
    assert!(
        db.get_subscription(&OrgId::from("org-q"), &id)
            .await
            .unwrap()
            .is_none(),
        "another organization's get of the id finds nothing, kept or not"
    );

    db.upsert_subscription(upsert(&org, "sub-p", vec![filter("b")], 2_000))
        .await
        .unwrap();
    assert_eq!(
        get().await.unwrap().event_filters,
        vec![filter("b")],
        "this process's write"
    );

    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute(
        "UPDATE subscriptions SET uri = 'https://cb.example/q' WHERE id = 'sub-p'",
        [],
    )
    .unwrap();
    seen_soon(
        || async { get().await.unwrap().uri },
        "https://cb.example/q".to_owned(),
    )
    .await;

    assert!(db.delete_subscription(&org, &id).await.unwrap());
    assert!(get().await.is_none(), "this process's delete");
}

/// A list page in a stored order is kept like a get (`sqlite/read_cache.rs`):
/// a page after this process's write shows it at once, another
/// organization's page is its own, another process's change is seen soon;
/// a page in the core's order (`status`) is never kept.
#[tokio::test]
async fn a_list_page_sees_each_write_at_once_and_another_processs_soon() {
    use webhook_core::page::PageRequest;
    use webhook_core::store::Store;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pages.db");
    let db = SqliteDb::open(&path).unwrap();
    let (org, other) = (OrgId::from("org-p"), OrgId::from("org-q"));
    let filter = |o: &str| format!("/orgId/{o}/department/d/contact");
    let created = PageRequest::from_query(
        Some("sort=createdDateTime,desc"),
        &["createdDateTime", "status"],
    )
    .unwrap();
    let by_status =
        PageRequest::from_query(Some("sort=status"), &["createdDateTime", "status"]).unwrap();
    let uris = |org: OrgId, page: PageRequest| {
        let db = db.clone();
        async move {
            let listed = db.list_subscriptions(&org, &page, 1_000).await.unwrap();
            listed
                .content
                .into_iter()
                .map(|s| s.uri)
                .collect::<Vec<_>>()
        }
    };
    let at = |id: &str| format!("https://cb.example/{id}");

    db.upsert_subscription(upsert(&org, "sub-1", vec![filter("org-p")], 1_000))
        .await
        .unwrap();
    db.upsert_subscription(upsert(&other, "sub-9", vec![filter("org-q")], 1_000))
        .await
        .unwrap();
    for _ in 0..2 {
        assert_eq!(uris(org.clone(), created.clone()).await, vec![at("sub-1")]);
        assert_eq!(
            uris(other.clone(), created.clone()).await,
            vec![at("sub-9")]
        );
    }

    db.upsert_subscription(upsert(&org, "sub-2", vec![filter("org-p")], 2_000))
        .await
        .unwrap();
    assert_eq!(
        uris(org.clone(), created.clone()).await,
        vec![at("sub-2"), at("sub-1")],
        "this process's write"
    );

    let raw = rusqlite::Connection::open(&path).unwrap();
    let change = "UPDATE subscriptions SET uri = 'https://cb.example/moved' WHERE id = 'sub-1'";
    assert_eq!(uris(org.clone(), by_status.clone()).await.len(), 2);
    raw.execute(change, []).unwrap();
    seen_soon(
        || uris(org.clone(), created.clone()),
        vec![at("sub-2"), at("moved")],
    )
    .await;
    raw.execute("DELETE FROM subscriptions WHERE id = 'sub-2'", [])
        .unwrap();
    assert_eq!(
        uris(org.clone(), by_status.clone()).await,
        vec![at("moved")],
        "a page in the core's order is read at once"
    );
}
