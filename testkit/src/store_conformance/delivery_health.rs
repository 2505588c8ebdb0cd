//! The delivery bookkeeping a subscription carries: failure streaks and blacklisting, the
//! circuit breaker and a receiver's pause, the rate limit's slots, and what fan-out sees of them.

use super::*;

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
