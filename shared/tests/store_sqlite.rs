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
        .put_message(&OrgId::from("org"), &message)
        .await
        .unwrap();
    let reopened = SqliteDb::open(&path).unwrap();
    assert_eq!(
        reopened
            .get_message(&OrgId::from("org"), "m")
            .await
            .unwrap(),
        Some(message)
    );
}
