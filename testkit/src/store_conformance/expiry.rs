//! Conformance cases for expiry reminders (`Store::expiring_subscriptions`,
//! `Store::mark_expiry_reminded`): the same rules on every adapter. The job
//! reads every organization, so each case works in a time window of its own
//! (far in the future, so no TTL removes anything meanwhile).

use std::sync::Arc;

use webhook_core::ids::{OrgId, SubscriptionId};
use webhook_core::model::SubscriptionStatus;
use webhook_core::store::{DeliveryRecord, Store, StoredSubscription};

use super::{filter, unique, upsert};

/// One `#[tokio::test]` per expiry case for an adapter.
#[macro_export]
macro_rules! expiry_conformance_tests {
    ($make:expr) => {
        $crate::expiry_conformance_tests!(@cases $make;
            expiring_subscriptions_are_found_soonest_first_in_every_organization,
            a_reminder_is_marked_once_and_rearmed_by_a_new_expiry,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let store: std::sync::Arc<dyn webhook_core::store::Store> = $make.await;
                $crate::store_conformance::expiry::$case(store).await;
            }
        )*
    };
}

const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

/// Creates or re-posts (org, uri) to expire at `expires_at`.
async fn posted(
    store: &Arc<dyn Store>,
    org: &str,
    uri: &str,
    expires_at: i64,
) -> StoredSubscription {
    let mut u = upsert(org, uri, &[&filter(org, "d")], expires_at - 30 * DAY);
    u.expires_at = expires_at;
    store.upsert_subscription(u).await.unwrap().0
}

/// What the job finds: (organization, id, expiry), in order.
async fn found(
    store: &Arc<dyn Store>,
    after: i64,
    until: i64,
    limit: usize,
) -> Vec<(OrgId, SubscriptionId, i64)> {
    store
        .expiring_subscriptions(after, until, limit)
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.org_id, s.id, s.expires_at))
        .collect()
}

fn named(sub: &StoredSubscription) -> (OrgId, SubscriptionId, i64) {
    (sub.org_id.clone(), sub.id.clone(), sub.expires_at)
}

pub async fn expiring_subscriptions_are_found_soonest_first_in_every_organization(
    store: Arc<dyn Store>,
) {
    // 16:53 UTC: a day's window crosses midnight.
    let b = 4_100_000_000_000;
    let (a, o) = (unique("org-a"), unique("org-b"));
    let a1 = posted(&store, &a, "https://example.com/a1", b + 3 * HOUR).await;
    let o1 = posted(&store, &o, "https://example.com/b1", b + HOUR).await;
    let a2 = posted(&store, &a, "https://example.com/a2", b + 10 * HOUR).await;
    let o2 = posted(&store, &o, "https://example.com/b2", b + DAY).await;
    let a3 = posted(&store, &a, "https://example.com/a3", b).await;
    let o3 = posted(&store, &o, "https://example.com/b3", b + DAY + 1).await;
    let a4 = posted(&store, &a, "https://example.com/a4", b + 3 * DAY).await;

    let window = [named(&o1), named(&a1), named(&a2), named(&o2)];
    assert_eq!(
        found(&store, b, b + DAY, 100).await,
        window,
        "(after, until], soonest first"
    );
    assert_eq!(found(&store, b, b + DAY, 2).await, window[..2]);
    assert_eq!(
        found(&store, b, b + DAY, 3).await,
        window[..3],
        "the limit across days"
    );
    assert!(found(&store, b, b + DAY, 0).await.is_empty());
    assert!(
        found(&store, b + DAY, b, 10).await.is_empty(),
        "an empty window"
    );
    assert_eq!(found(&store, b - 1, b, 10).await, [named(&a3)]);
    assert_eq!(
        found(&store, b, b + 4 * DAY, 100).await,
        [
            named(&o1),
            named(&a1),
            named(&a2),
            named(&o2),
            named(&o3),
            named(&a4)
        ]
    );

    // Any status, and the whole subscription, as stored.
    let org_a = OrgId::from(&a);
    store
        .record_delivery(&org_a, &a1.id, DeliveryRecord::Gone)
        .await
        .unwrap();
    let subs = store.expiring_subscriptions(b, b + DAY, 100).await.unwrap();
    assert_eq!(subs[1].status, SubscriptionStatus::Blacklisted);
    for sub in &subs {
        assert_eq!(
            Some(sub),
            store
                .get_subscription(&sub.org_id, &sub.id)
                .await
                .unwrap()
                .as_ref()
        );
    }
}

pub async fn a_reminder_is_marked_once_and_rearmed_by_a_new_expiry(store: Arc<dyn Store>) {
    let b = 4_200_000_000_000;
    let (a, o) = (unique("org-a"), unique("org-b"));
    let (org_a, org_b) = (OrgId::from(&a), OrgId::from(&o));
    let uri = "https://example.com/expiring";
    let s = posted(&store, &a, uri, b + HOUR).await;
    let t = posted(&store, &o, uri, b + 2 * HOUR).await;
    let window = |store: Arc<dyn Store>| async move { found(&store, b, b + DAY, 100).await };
    assert_eq!(window(store.clone()).await, [named(&s), named(&t)]);

    for _ in 0..2 {
        store
            .mark_expiry_reminded(&org_a, &s.id, b + HOUR)
            .await
            .unwrap();
        assert_eq!(
            window(store.clone()).await,
            [named(&t)],
            "marked, idempotent"
        );
    }
    // Another expiry, another organization: nothing changes.
    store
        .mark_expiry_reminded(&org_b, &t.id, b + 5 * HOUR)
        .await
        .unwrap();
    store
        .mark_expiry_reminded(&org_a, &t.id, b + 2 * HOUR)
        .await
        .unwrap();
    assert_eq!(window(store.clone()).await, [named(&t)]);

    // The reminder is per expiry: a re-post keeping it stays reminded, a
    // new expiry re-arms it, even one reminded of before.
    posted(&store, &a, uri, b + HOUR).await;
    assert_eq!(window(store.clone()).await, [named(&t)]);
    let s = posted(&store, &a, uri, b + 3 * HOUR).await;
    assert_eq!(window(store.clone()).await, [named(&t), named(&s)]);
    let s = posted(&store, &a, uri, b + 2 * DAY).await;
    assert_eq!(
        window(store.clone()).await,
        [named(&t)],
        "out of the window"
    );
    assert_eq!(
        found(&store, b, b + 3 * DAY, 100).await,
        [named(&t), named(&s)]
    );
    let s = posted(&store, &a, uri, b + HOUR).await;
    assert_eq!(window(store.clone()).await, [named(&s), named(&t)]);

    // A mark for an expiry it no longer has leaves the current one armed.
    store
        .mark_expiry_reminded(&org_a, &s.id, b + 3 * HOUR)
        .await
        .unwrap();
    store
        .mark_expiry_reminded(&org_b, &t.id, b + 2 * HOUR)
        .await
        .unwrap();
    assert_eq!(window(store.clone()).await, [named(&s)]);

    // A deleted subscription is gone from the job; marking it is harmless.
    assert!(store.delete_subscription(&org_a, &s.id).await.unwrap());
    assert!(found(&store, b, b + 3 * DAY, 100).await.is_empty());
    store
        .mark_expiry_reminded(&org_a, &s.id, b + HOUR)
        .await
        .unwrap();
    let t = posted(&store, &o, uri, b + 4 * HOUR).await;
    assert_eq!(window(store.clone()).await, [named(&t)]);
}
