//! Stored messages: read only by their organization, absent past their retention.

use super::*;

fn sample_message(id: &str, text: &str) -> Message {
    Message {
        id: id.into(),
        owner: None,
        time: None,
        direction: "in".into(),
        to: vec!["+15550100".into()],
        from: "".into(),
        text: text.into(),
        media: vec![],
        attachments: vec!["a.png".into()],
    }
}

/// Received "now" in the store's clock terms: recent enough that no TTL
/// removes it while the case runs.
fn recently() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

pub async fn messages_are_scoped_to_the_organization(store: Arc<dyn Store>) {
    let (a, b) = (unique("org-a"), unique("org-b"));
    let at = recently();
    let mut message = sample_message("msg-1", "héllo ✓");
    store
        .put_message(&OrgId::from(&a), &message, at)
        .await
        .unwrap();
    assert_eq!(
        store
            .get_message(&OrgId::from(&a), "msg-1", at)
            .await
            .unwrap(),
        Some(message.clone())
    );
    assert_eq!(
        store
            .get_message(&OrgId::from(&b), "msg-1", at)
            .await
            .unwrap(),
        None,
        "another organization's message id is not found"
    );
    assert_eq!(
        store
            .get_message(&OrgId::from(&a), "msg-2", at)
            .await
            .unwrap(),
        None
    );
    message.text = "edited".into();
    store
        .put_message(&OrgId::from(&a), &message, at)
        .await
        .unwrap();
    assert_eq!(
        store
            .get_message(&OrgId::from(&a), "msg-1", at)
            .await
            .unwrap()
            .unwrap()
            .text,
        "edited"
    );
    // An id that holds the key's separator names one message, not another
    // organization's (organization ids have no '#').
    let tricky = sample_message(&format!("{b}#x"), "t");
    store
        .put_message(&OrgId::from(&a), &tricky, at)
        .await
        .unwrap();
    assert_eq!(
        store
            .get_message(&OrgId::from(&a), &tricky.id, at)
            .await
            .unwrap(),
        Some(tricky)
    );
    assert_eq!(
        store.get_message(&OrgId::from(&b), "x", at).await.unwrap(),
        None
    );
}

/// A message received before the retention's start is absent, whether or
/// not it was purged (or expired by TTL) yet; storing it again renews it.
pub async fn messages_past_their_retention_are_absent(store: Arc<dyn Store>) {
    let org = OrgId::from(unique("org"));
    let at = recently();
    let stored = sample_message("msg-old", "personal data");
    store.put_message(&org, &stored, at).await.unwrap();
    assert_eq!(
        store.get_message(&org, "msg-old", at).await.unwrap(),
        Some(stored.clone()),
        "received exactly at the retention's start: kept"
    );
    assert_eq!(
        store.get_message(&org, "msg-old", at + 1).await.unwrap(),
        None,
        "received before the retention's start: gone"
    );
    store.put_message(&org, &stored, at + 10).await.unwrap();
    assert_eq!(
        store.get_message(&org, "msg-old", at + 1).await.unwrap(),
        Some(stored),
        "stored again: kept from the new receipt"
    );
}
