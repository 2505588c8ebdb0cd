//! The store conformance suite: one set of cases, run against every adapter
//! (`store_sqlite.rs`, `store_dynamodb.rs`), so adapters cannot drift apart.
//! Each case works in organizations of its own, so one store can serve all.

#![allow(dead_code)]

#[macro_use]
pub mod corrupt;
#[macro_use]
pub mod expiry;
#[macro_use]
pub mod history;
#[macro_use]
pub mod listing;
#[macro_use]
pub mod secrets;

use std::collections::HashSet;
use std::sync::Arc;

use webhook_core::health::rate::Reserved;
use webhook_core::ids::{OrgId, SubscriptionId};
use webhook_core::model::{Message, SubscriptionStatus};
use webhook_core::page::{PageRequest, MAX_SIZE};
use webhook_core::store::{
    DeliveryRecord, DisabledEntry, Store, StoreError, StoredSubscription, Upsert,
};

/// Generates one `#[tokio::test]` per case for an adapter. `$make` is an
/// async expression giving an `Arc<dyn Store>`.
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!(@cases $make;
            upsert_creates_then_updates,
            ordered_is_set_on_create_and_kept_by_an_update_that_omits_it,
            update_reactivates_and_clears_failures,
            concurrent_upserts_of_one_uri_make_one,
            creation_is_capped_per_organization,
            reads_and_deletes_are_scoped_to_the_organization,
            filter_index_follows_updates_and_deletes,
            delivery_records_drive_blacklisting,
            messages_are_scoped_to_the_organization,
            messages_past_their_retention_are_absent,
            fan_out_sees_delivery_bookkeeping,
            the_circuit_breaker_is_compare_and_set_and_a_repost_clears_it_but_not_a_pause,
            the_rate_limit_is_kept_and_its_slots_are_spaced,
            a_destinations_role_and_validated_external_id_are_kept,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let store: std::sync::Arc<dyn webhook_core::store::Store> = $make.await;
                conformance::$case(store).await;
            }
        )*
    };
}

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

pub fn upsert(org: &str, uri: &str, filters: &[&str], now: i64) -> Upsert {
    Upsert {
        org_id: org.to_owned().into(),
        uri: uri.to_owned(),
        event_filters: filters.iter().map(|f| f.to_string()).collect(),
        disabled_filters: vec![],
        expires_at: now + 86_400_000,
        now,
        new_id: uuid::Uuid::now_v7().to_string().into(),
        new_secret: webhook_core::secret::new_signing_secret(),
        max_per_org: 1000,
        ordered: None,
        rate_limit: None,
        role_arn: None,
        external_id: None,
    }
}

fn filter(org: &str, dep: &str) -> String {
    format!("/orgId/{org}/department/{dep}/message?direction=inbound")
}

pub async fn upsert_creates_then_updates(store: Arc<dyn Store>) {
    let org = unique("org");
    let f1 = filter(&org, "d1");
    let mut first = upsert(&org, "https://example.com/a", &[&f1], 1_000);
    first.disabled_filters = vec![DisabledEntry {
        filter: filter("other", "d"),
        reason: "PERMISSION_DENIED".into(),
        message: "not yours".into(),
    }];
    let (created, was_created) = store.upsert_subscription(first.clone()).await.unwrap();
    assert!(was_created);
    assert_eq!(created.id, first.new_id);
    assert_eq!(created.secret, first.new_secret);
    assert_eq!(created.status, SubscriptionStatus::Active);
    assert_eq!((created.created_at, created.updated_at), (1_000, 1_000));
    assert_eq!(created.disabled_filters, first.disabled_filters);
    assert_eq!(created.failing_since, None);

    let f2 = filter(&org, "d2");
    let second = upsert(&org, "https://example.com/a", &[&f2, &f1], 2_000);
    let (updated, was_created) = store.upsert_subscription(second.clone()).await.unwrap();
    assert!(!was_created);
    assert_eq!(updated.id, created.id, "same (org, uri), same id");
    assert_eq!(
        updated.secret, created.secret,
        "the secret survives updates"
    );
    assert_eq!(updated.created_at, 1_000);
    assert_eq!(updated.updated_at, 2_000);
    assert_eq!(updated.event_filters, vec![f2.clone(), f1.clone()]);
    assert_eq!(updated.expires_at, second.expires_at);
    assert!(updated.disabled_filters.is_empty());
    assert_eq!(
        store
            .get_subscription(&OrgId::from(&org), &created.id)
            .await
            .unwrap(),
        Some(updated)
    );
}

pub async fn ordered_is_set_on_create_and_kept_by_an_update_that_omits_it(store: Arc<dyn Store>) {
    let org = unique("org");
    let f = filter(&org, "d");
    let plain = upsert(&org, "https://example.com/plain", &[&f], 1_000);
    assert!(!store.upsert_subscription(plain).await.unwrap().0.ordered);
    let mut ordered = upsert(&org, "https://example.com/o", &[&f], 1_000);
    ordered.ordered = Some(true);
    let (created, _) = store.upsert_subscription(ordered).await.unwrap();
    assert!(created.ordered);
    let omitted = upsert(&org, "https://example.com/o", &[&f], 2_000);
    let (kept, _) = store.upsert_subscription(omitted).await.unwrap();
    assert!(kept.ordered, "an update that does not mention it keeps it");
    let mut off = upsert(&org, "https://example.com/o", &[&f], 3_000);
    off.ordered = Some(false);
    let (cleared, _) = store.upsert_subscription(off).await.unwrap();
    assert!(!cleared.ordered);
    let read = store
        .get_subscription(&OrgId::from(&org), &created.id)
        .await;
    assert_eq!(read.unwrap().map(|s| s.ordered), Some(false));
}

/// An AWS destination's role and the external id it was validated with are
/// stored, read back, replaced by a re-post, and absent for a callback.
pub async fn a_destinations_role_and_validated_external_id_are_kept(store: Arc<dyn Store>) {
    let org = unique("org");
    let f = filter(&org, "d");
    let arn = "arn:aws:sqs:us-east-1:222222222222:orders";
    let mut first = upsert(&org, arn, &[&f], 1_000);
    first.role_arn = Some("arn:aws:iam::222222222222:role/a".into());
    first.external_id = Some("webhooks-1".into());
    let (created, _) = store.upsert_subscription(first).await.unwrap();
    let read = |id: SubscriptionId| {
        let store = store.clone();
        let org = OrgId::from(&org);
        async move { store.get_subscription(&org, &id).await.unwrap().unwrap() }
    };
    let got = read(created.id.clone()).await;
    assert_eq!(
        (got.role_arn.as_deref(), got.external_id.as_deref()),
        (Some("arn:aws:iam::222222222222:role/a"), Some("webhooks-1"))
    );
    let mut again = upsert(&org, arn, &[&f], 2_000);
    again.role_arn = Some("arn:aws:iam::222222222222:role/b".into());
    again.external_id = Some("renamed-1".into());
    store.upsert_subscription(again).await.unwrap();
    let got = read(created.id.clone()).await;
    assert_eq!(
        (got.role_arn.as_deref(), got.external_id.as_deref()),
        (Some("arn:aws:iam::222222222222:role/b"), Some("renamed-1"))
    );
    let (callback, _) = store
        .upsert_subscription(upsert(&org, "https://example.com/c", &[&f], 1_000))
        .await
        .unwrap();
    let got = read(callback.id).await;
    assert_eq!((got.role_arn, got.external_id), (None, None));
}

pub async fn update_reactivates_and_clears_failures(store: Arc<dyn Store>) {
    let org = unique("org");
    let (sub, _) = store
        .upsert_subscription(upsert(
            &org,
            "https://example.com/r",
            &[&filter(&org, "d")],
            1_000,
        ))
        .await
        .unwrap();
    let status = store
        .record_delivery(
            &OrgId::from(&org),
            &sub.id,
            DeliveryRecord::Failed {
                now: 5_000,
                blacklist_after_ms: 1_000_000,
            },
        )
        .await
        .unwrap();
    assert_eq!(status, Some(SubscriptionStatus::Active));
    assert_eq!(
        store
            .record_delivery(&OrgId::from(&org), &sub.id, DeliveryRecord::Gone)
            .await
            .unwrap(),
        Some(SubscriptionStatus::Blacklisted)
    );
    let (again, created) = store
        .upsert_subscription(upsert(
            &org,
            "https://example.com/r",
            &[&filter(&org, "d")],
            9_000,
        ))
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(again.status, SubscriptionStatus::Active);
    assert_eq!(again.failing_since, None);
}

pub async fn concurrent_upserts_of_one_uri_make_one(store: Arc<dyn Store>) {
    let org = unique("org");
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..20 {
        let store = store.clone();
        let u = upsert(
            &org,
            "https://example.com/same",
            &[&filter(&org, &format!("d{i}"))],
            1_000 + i,
        );
        tasks.spawn(async move { store.upsert_subscription(u).await });
    }
    let mut ids = HashSet::new();
    let mut creations = 0;
    while let Some(r) = tasks.join_next().await {
        let (sub, created) = r.unwrap().unwrap();
        ids.insert(sub.id);
        creations += usize::from(created);
    }
    assert_eq!(ids.len(), 1);
    assert_eq!(creations, 1, "exactly one upsert created it");
    assert_eq!(
        store
            .list_subscriptions(&OrgId::from(&org), &PageRequest::first(MAX_SIZE), 0)
            .await
            .unwrap()
            .content
            .len(),
        1
    );
}

pub async fn creation_is_capped_per_organization(store: Arc<dyn Store>) {
    let org = unique("org");
    let f = filter(&org, "d");
    for uri in ["https://example.com/1", "https://example.com/2"] {
        let mut u = upsert(&org, uri, &[&f], 1_000);
        u.max_per_org = 2;
        store.upsert_subscription(u).await.unwrap();
    }
    let mut third = upsert(&org, "https://example.com/3", &[&f], 1_000);
    third.max_per_org = 2;
    assert!(matches!(
        store.upsert_subscription(third).await,
        Err(StoreError::LimitReached(2))
    ));
    let mut update = upsert(&org, "https://example.com/1", &[&f], 2_000);
    update.max_per_org = 2;
    assert!(
        store.upsert_subscription(update).await.is_ok(),
        "updates are not creations"
    );
    // Deleting frees a place.
    let subs = store
        .list_subscriptions(&OrgId::from(&org), &PageRequest::first(MAX_SIZE), 0)
        .await
        .unwrap()
        .content;
    assert!(store
        .delete_subscription(&OrgId::from(&org), &subs[0].id)
        .await
        .unwrap());
    let mut fourth = upsert(&org, "https://example.com/4", &[&f], 3_000);
    fourth.max_per_org = 2;
    assert!(store.upsert_subscription(fourth).await.is_ok());
}

pub async fn reads_and_deletes_are_scoped_to_the_organization(store: Arc<dyn Store>) {
    let (a, b) = (unique("org-a"), unique("org-b"));
    let (sub, _) = store
        .upsert_subscription(upsert(
            &a,
            "https://example.com/x",
            &[&filter(&a, "d")],
            1_000,
        ))
        .await
        .unwrap();
    store
        .upsert_subscription(upsert(
            &b,
            "https://example.com/x",
            &[&filter(&b, "d")],
            1_000,
        ))
        .await
        .unwrap();
    assert_eq!(
        store
            .get_subscription(&OrgId::from(&b), &sub.id)
            .await
            .unwrap(),
        None
    );
    assert!(!store
        .delete_subscription(&OrgId::from(&b), &sub.id)
        .await
        .unwrap());
    assert_eq!(
        store
            .record_delivery(&OrgId::from(&b), &sub.id, DeliveryRecord::Gone)
            .await
            .unwrap(),
        None
    );
    let listed = store
        .list_subscriptions(&OrgId::from(&a), &PageRequest::first(MAX_SIZE), 0)
        .await
        .unwrap()
        .content;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, sub.id);
    assert_eq!(
        listed[0].status,
        SubscriptionStatus::Active,
        "org b could not blacklist it"
    );
    assert!(store
        .delete_subscription(&OrgId::from(&a), &sub.id)
        .await
        .unwrap());
    assert_eq!(
        store
            .get_subscription(&OrgId::from(&a), &sub.id)
            .await
            .unwrap(),
        None
    );
    assert!(!store
        .delete_subscription(&OrgId::from(&a), &sub.id)
        .await
        .unwrap());
    assert_eq!(
        store
            .list_subscriptions(&OrgId::from(&b), &PageRequest::first(MAX_SIZE), 0)
            .await
            .unwrap()
            .content
            .len(),
        1
    );
    assert!(store
        .list_subscriptions(
            &OrgId::from(&unique("nobody")),
            &PageRequest::first(MAX_SIZE),
            0
        )
        .await
        .unwrap()
        .content
        .is_empty());
}

pub async fn filter_index_follows_updates_and_deletes(store: Arc<dyn Store>) {
    let (a, b) = (unique("org-a"), unique("org-b"));
    let fa = filter(&a, "d");
    let fa2 = filter(&a, "d2");
    let (s1, _) = store
        .upsert_subscription(upsert(&a, "https://example.com/1", &[&fa], 1_000))
        .await
        .unwrap();
    let (s2, _) = store
        .upsert_subscription(upsert(&a, "https://example.com/2", &[&fa, &fa2], 1_000))
        .await
        .unwrap();
    store
        .upsert_subscription(upsert(
            &b,
            "https://example.com/1",
            &[&filter(&b, "d")],
            1_000,
        ))
        .await
        .unwrap();
    let ids = |subs: Vec<webhook_core::store::StoredSubscription>| {
        subs.into_iter().map(|s| s.id).collect::<HashSet<_>>()
    };
    assert_eq!(
        ids(store.subscriptions_for_filter(&fa).await.unwrap()),
        HashSet::from([s1.id.clone(), s2.id.clone()])
    );
    assert_eq!(
        ids(store.subscriptions_for_filter(&fa2).await.unwrap()),
        HashSet::from([s2.id.clone()])
    );
    // The index returns whole subscriptions: uri and secret for delivery.
    let found = store.subscriptions_for_filter(&fa2).await.unwrap();
    assert_eq!(found[0].uri, "https://example.com/2");
    assert_eq!(found[0].secret, s2.secret);
    // An update that drops a filter removes it from the index.
    store
        .upsert_subscription(upsert(&a, "https://example.com/2", &[&fa2], 2_000))
        .await
        .unwrap();
    assert_eq!(
        ids(store.subscriptions_for_filter(&fa).await.unwrap()),
        HashSet::from([s1.id.clone()])
    );
    assert!(store
        .delete_subscription(&OrgId::from(&a), &s1.id)
        .await
        .unwrap());
    assert!(store
        .subscriptions_for_filter(&fa)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .subscriptions_for_filter(&filter(&unique("none"), "d"))
        .await
        .unwrap()
        .is_empty());
}

pub async fn delivery_records_drive_blacklisting(store: Arc<dyn Store>) {
    let org = unique("org");
    let (sub, _) = store
        .upsert_subscription(upsert(
            &org,
            "https://example.com/b",
            &[&filter(&org, "d")],
            1_000,
        ))
        .await
        .unwrap();
    let fail = |now| DeliveryRecord::Failed {
        now,
        blacklist_after_ms: 10_000,
    };
    assert_eq!(
        store
            .record_delivery(&OrgId::from(&org), &sub.id, fail(100_000))
            .await
            .unwrap(),
        Some(SubscriptionStatus::Active)
    );
    assert_eq!(
        store
            .get_subscription(&OrgId::from(&org), &sub.id)
            .await
            .unwrap()
            .unwrap()
            .failing_since,
        Some(100_000)
    );
    assert_eq!(
        store
            .record_delivery(&OrgId::from(&org), &sub.id, fail(105_000))
            .await
            .unwrap(),
        Some(SubscriptionStatus::Active)
    );
    assert_eq!(
        store
            .get_subscription(&OrgId::from(&org), &sub.id)
            .await
            .unwrap()
            .unwrap()
            .failing_since,
        Some(100_000),
        "the streak keeps its start"
    );
    // A success ends the streak; the next failure starts a new one.
    assert_eq!(
        store
            .record_delivery(&OrgId::from(&org), &sub.id, DeliveryRecord::Succeeded)
            .await
            .unwrap(),
        Some(SubscriptionStatus::Active)
    );
    assert_eq!(
        store
            .get_subscription(&OrgId::from(&org), &sub.id)
            .await
            .unwrap()
            .unwrap()
            .failing_since,
        None
    );
    store
        .record_delivery(&OrgId::from(&org), &sub.id, fail(200_000))
        .await
        .unwrap();
    assert_eq!(
        store
            .record_delivery(&OrgId::from(&org), &sub.id, fail(209_999))
            .await
            .unwrap(),
        Some(SubscriptionStatus::Active)
    );
    assert_eq!(
        store
            .record_delivery(&OrgId::from(&org), &sub.id, fail(210_000))
            .await
            .unwrap(),
        Some(SubscriptionStatus::Blacklisted)
    );
    assert_eq!(
        store
            .get_subscription(&OrgId::from(&org), &sub.id)
            .await
            .unwrap()
            .unwrap()
            .status,
        SubscriptionStatus::Blacklisted
    );
    assert_eq!(
        store
            .record_delivery(
                &OrgId::from(&org),
                &SubscriptionId::from("no-such-id"),
                DeliveryRecord::Succeeded
            )
            .await
            .unwrap(),
        None
    );
}

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

/// What fan-out returns follows blacklisting and failure streaks (an adapter
/// that copies subscriptions into its filter index must keep the copies in step).
/// The breaker is written compare-and-set on its revision, read with the
/// subscription, and cleared (at a new revision) when the uri is posted again;
/// a receiver's pause is kept until its time.
pub async fn the_circuit_breaker_is_compare_and_set_and_a_repost_clears_it_but_not_a_pause(
    store: Arc<dyn Store>,
) {
    use webhook_core::failure::CallFailure;
    use webhook_core::health::{BreakerRule, Health, Signal};
    let org = unique("org");
    let f = format!("/orgId/{org}/department/d/contact");
    let (sub, _) = store
        .upsert_subscription(upsert(&org, "https://example.com/h", &[&f], 50_000))
        .await
        .unwrap();
    let org_id = OrgId::from(&org);
    assert_eq!(sub.health, Health::default());
    let rule = BreakerRule {
        failures: 1,
        ..BreakerRule::default()
    };
    let open = Health::default()
        .after(&Signal::Outage(CallFailure::Timeout.into()), &rule, 10_000)
        .unwrap();
    assert!(store
        .update_health(&org_id, &sub.id, 0, &open)
        .await
        .unwrap());
    // A writer that read the old revision loses.
    assert!(!store
        .update_health(&org_id, &sub.id, 0, &open)
        .await
        .unwrap());
    let read = store
        .get_subscription(&org_id, &sub.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.health, open);
    assert_eq!(read.health.state(10_001).as_str(), "open");
    // Another organization's id is not found, so nothing is written.
    let other = OrgId::from(&unique("org"));
    assert!(!store
        .update_health(&other, &sub.id, 1, &Health::default())
        .await
        .unwrap());
    store
        .upsert_subscription(upsert(&org, "https://example.com/h", &[&f], 60_000))
        .await
        .unwrap();
    let reposted = store
        .get_subscription(&org_id, &sub.id)
        .await
        .unwrap()
        .unwrap();
    assert!(reposted.health.is_clear());
    assert!(reposted.health.rev > open.rev, "{:?}", reposted.health);
    assert_eq!(reposted.health.paused_until, None);
    // A receiver's pause outlives a re-post (it ends at the time asked); one
    // that has ended is cleared.
    let paused = reposted.health.pause(100_000);
    assert!(store
        .update_health(&org_id, &sub.id, reposted.health.rev, &paused)
        .await
        .unwrap());
    for (now, kept) in [(70_000, Some(100_000)), (100_000, None)] {
        store
            .upsert_subscription(upsert(&org, "https://example.com/h", &[&f], now))
            .await
            .unwrap();
        let read = store
            .get_subscription(&org_id, &sub.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(read.health.paused_until, kept, "re-posted at {now}");
        assert!(read.health.is_clear(), "{:?}", read.health);
    }
}

pub async fn fan_out_sees_delivery_bookkeeping(store: Arc<dyn Store>) {
    let org = unique("org");
    let f = filter(&org, "d");
    let (sub, _) = store
        .upsert_subscription(upsert(&org, "https://example.com/f", &[&f], 1_000))
        .await
        .unwrap();
    let fail = DeliveryRecord::Failed {
        now: 50_000,
        blacklist_after_ms: 10_000,
    };
    store
        .record_delivery(&OrgId::from(&org), &sub.id, fail)
        .await
        .unwrap();
    let found = store.subscriptions_for_filter(&f).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].failing_since, Some(50_000));
    store
        .record_delivery(&OrgId::from(&org), &sub.id, DeliveryRecord::Gone)
        .await
        .unwrap();
    let found = store.subscriptions_for_filter(&f).await.unwrap();
    assert_eq!(found[0].status, SubscriptionStatus::Blacklisted);
    // Posting the uri again reactivates it, in the index too.
    store
        .upsert_subscription(upsert(&org, "https://example.com/f", &[&f], 60_000))
        .await
        .unwrap();
    let found = store.subscriptions_for_filter(&f).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].status, SubscriptionStatus::Active);
    assert_eq!(found[0].failing_since, None);
    // The circuit breaker is the subscription's own (DynamoDB keeps it off
    // the index copies): the rest is the same.
    let without_health = |s: StoredSubscription| StoredSubscription {
        health: Default::default(),
        ..s
    };
    assert_eq!(
        without_health(found[0].clone()),
        without_health(
            store
                .get_subscription(&OrgId::from(&org), &sub.id)
                .await
                .unwrap()
                .unwrap()
        )
    );
}

/// `rateLimit` is stored on create, kept by an update that does not name it,
/// removed by one that clears it; its rate slots are spaced from now, none is
/// taken past the horizon, each is taken once by concurrent reservations, and
/// another subscription has its own.
pub async fn the_rate_limit_is_kept_and_its_slots_are_spaced(store: Arc<dyn Store>) {
    let org = unique("org");
    let f = filter(&org, "rate");
    let mut first = upsert(&org, "https://example.com/rate", &[&f], 1_000);
    first.rate_limit = Some(Some(50));
    let (created, _) = store.upsert_subscription(first).await.unwrap();
    assert_eq!(created.rate_limit, Some(50));
    let got = store.get_subscription(&created.org_id, &created.id).await;
    assert_eq!(got.unwrap().unwrap().rate_limit, Some(50));
    let kept = upsert(&org, "https://example.com/rate", &[&f], 2_000);
    let (updated, _) = store.upsert_subscription(kept).await.unwrap();
    assert_eq!(
        updated.rate_limit,
        Some(50),
        "an update without it keeps it"
    );
    let mut cleared = upsert(&org, "https://example.com/rate", &[&f], 3_000);
    cleared.rate_limit = Some(None);
    let (updated, _) = store.upsert_subscription(cleared).await.unwrap();
    assert_eq!(updated.rate_limit, None);
    let got = store.get_subscription(&created.org_id, &created.id).await;
    assert_eq!(got.unwrap().unwrap().rate_limit, None);

    let (sub, other) = (created.id.clone(), SubscriptionId::from(unique("sub")));
    // Limit 3: slots 366.67 ms apart (`health/rate.rs`), taken within a second.
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut taken = Vec::new();
    for busy in [true, false, false] {
        // The adapter's first guess may be wrong: the slot is the same.
        match store.reserve_rate_slot(&sub, 3, t, busy).await.unwrap() {
            Reserved::At(at) => taken.push(at),
            full => panic!("slot {}: {full:?}", taken.len()),
        }
    }
    assert_eq!(
        taken,
        [t, t + 367, t + 734],
        "spaced from now, rounded up to the ms"
    );
    for busy in [true, false] {
        assert_eq!(
            store
                .reserve_rate_slot(&sub, 3, t + 10, busy)
                .await
                .unwrap(),
            Reserved::Full((t + 1_100) * 1_000 + 1),
            "the next free slot is past the horizon: nothing taken"
        );
    }
    assert_eq!(
        store
            .reserve_rate_slot(&sub, 3, t + 110, true)
            .await
            .unwrap(),
        Reserved::At(t + 1_101),
        "within the horizon now"
    );
    assert_eq!(
        store
            .reserve_rate_slot(&sub, 3, t + 9_000, true)
            .await
            .unwrap(),
        Reserved::At(t + 9_000),
        "after a quiet spell, from now"
    );
    assert_eq!(
        store.reserve_rate_slot(&other, 3, t, false).await.unwrap(),
        Reserved::At(t),
        "another subscription"
    );
    // Taken at once by many (processes, instances): each slot once.
    let third = SubscriptionId::from(unique("sub"));
    let racing: Vec<_> = (0..8)
        .map(|i| {
            let (store, third) = (store.clone(), third.clone());
            tokio::spawn(async move { store.reserve_rate_slot(&third, 3, t, i % 2 == 0).await })
        })
        .collect();
    let mut got = Vec::new();
    for one in racing {
        got.push(one.await.unwrap().unwrap());
    }
    got.sort_by_key(|r| match r {
        Reserved::At(at) => *at,
        Reserved::Full(_) => i64::MAX,
    });
    assert_eq!(
        &got[..3],
        &[
            Reserved::At(t),
            Reserved::At(t + 367),
            Reserved::At(t + 734)
        ],
        "{got:?}"
    );
    assert!(
        got[3..].iter().all(|r| matches!(r, Reserved::Full(_))),
        "{got:?}"
    );
}
