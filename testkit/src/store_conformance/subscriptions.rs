//! Subscriptions in the store: created and updated by uri, capped and scoped per
//! organization, their filter index kept in step.

use super::*;

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
