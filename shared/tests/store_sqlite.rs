//! The store conformance suite on the SQLite adapter, on a real file.

mod conformance;

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

conformance_tests!(store());
secret_conformance_tests!(store());
listing_conformance_tests!(store());
expiry_conformance_tests!(store());

async fn history() -> Arc<dyn webhook_core::history::DeliveryHistory> {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteDb::open(&dir.path().join("history.db")).unwrap();
    std::mem::forget(dir);
    Arc::new(store)
}

history_conformance_tests!(history());

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
