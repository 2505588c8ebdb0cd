//! Conformance cases for lists paged in the store
//! (`Store::list_subscriptions`): every sort order, `ignorecase` (ASCII
//! only), the status as seen at `now`, first, middle, last and past-the-end
//! pages, size edges, totals after creates, updates and deletes, tenancy.

use std::sync::Arc;

use webhook_core::ids::{OrgId, SubscriptionId};
use webhook_core::model::Page;
use webhook_core::page::{PageRequest, MAX_SIZE};
use webhook_core::store::order::{self, SORTABLE};
use webhook_core::store::{DeliveryRecord, Store, StoredSubscription};

use super::{filter, unique, upsert};

/// One `#[tokio::test]` per listing case for an adapter.
#[macro_export]
macro_rules! listing_conformance_tests {
    ($make:expr) => {
        $crate::listing_conformance_tests!(@cases $make;
            lists_are_sorted_and_paged_in_the_store,
            every_order_and_page_matches_the_reference,
            totals_follow_creates_updates_and_deletes,
            lists_are_scoped_to_the_organization,
            size_and_page_edges,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let store: std::sync::Arc<dyn webhook_core::store::Store> = $make.await;
                $crate::store_conformance::listing::$case(store).await;
            }
        )*
    };
}

/// When the lists are read: subscriptions expiring at or before it are
/// `EXPIRED`.
const NOW: i64 = 50_000;

fn page(query: &str) -> PageRequest {
    PageRequest::from_query(Some(query), SORTABLE).unwrap()
}

async fn list(
    store: &Arc<dyn Store>,
    org: &str,
    query: &str,
    now: i64,
) -> Page<StoredSubscription> {
    store
        .list_subscriptions(&OrgId::from(org), &page(query), now)
        .await
        .unwrap()
}

async fn ids(store: &Arc<dyn Store>, org: &str, query: &str, now: i64) -> Vec<String> {
    list(store, org, query, now)
        .await
        .content
        .iter()
        .map(|s| s.id.to_string())
        .collect()
}

/// Seven subscriptions: ties in creation time, ids and uris differing in
/// case, `_` (between the upper and lower case letters), a non-ASCII uri,
/// one blacklisted, two expired at [`NOW`] (one exactly at it), one updated.
async fn seven(store: &Arc<dyn Store>) -> (String, Vec<SubscriptionId>) {
    let org = unique("org");
    let f = filter(&org, "d");
    let specs: [(&str, &str, i64, i64); 7] = [
        ("sub-C", "Beta", 1_000, 100_000),
        ("sub-a", "alpha", 1_000, 10_000),
        ("sub-B", "_under", 2_000, 200_000),
        ("sub-d", "ALPHA", 3_000, 90_000),
        ("sub-e", "gamma", 3_000, NOW),
        ("Sub-f", "delta", 5_000, 300_000),
        ("sub-g", "Ça", 6_000, 70_000),
    ];
    let mut ids = Vec::new();
    for (id, path, created, expires) in specs {
        let mut u = upsert(&org, &format!("https://example.com/{path}"), &[&f], created);
        u.new_id = format!("{id}-{}", &org[4..]).into();
        u.expires_at = expires;
        let (sub, was_created) = store.upsert_subscription(u).await.unwrap();
        assert!(was_created);
        ids.push(sub.id);
    }
    store
        .record_delivery(&OrgId::from(&org), &ids[2], DeliveryRecord::Gone)
        .await
        .unwrap();
    let mut again = upsert(&org, "https://example.com/ALPHA", &[&f], 40_000);
    again.expires_at = 90_000;
    assert!(!store.upsert_subscription(again).await.unwrap().1);
    (org, ids)
}

/// The ids of `seven` in the order of these indexes.
fn expect(ids: &[SubscriptionId], order: &[usize]) -> Vec<String> {
    order.iter().map(|i| ids[*i].to_string()).collect()
}

pub async fn lists_are_sorted_and_paged_in_the_store(store: Arc<dyn Store>) {
    let (org, s) = seven(&store).await;
    let default = expect(&s, &[0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(ids(&store, &org, "", NOW).await, default);
    assert_eq!(
        ids(&store, &org, "sort=createdDateTime", NOW).await,
        default
    );
    let mut reversed = default.clone();
    reversed.reverse();
    assert_eq!(
        ids(&store, &org, "sort=createdDateTime,id,desc", NOW).await,
        reversed
    );
    // Creation time descending, ties by id ascending.
    assert_eq!(
        ids(&store, &org, "sort=createdDateTime,desc", NOW).await,
        expect(&s, &[6, 5, 3, 4, 2, 0, 1])
    );
    assert_eq!(
        ids(&store, &org, "sort=uri", NOW).await,
        expect(&s, &[3, 0, 2, 1, 5, 4, 6]),
        "byte order: upper case, then '_', then lower case, then non-ASCII"
    );
    assert_eq!(
        ids(&store, &org, "sort=uri,ignorecase", NOW).await,
        expect(&s, &[2, 1, 3, 0, 5, 4, 6]),
        "ASCII folded to lower case: '_' first; equal uris by creation"
    );
    assert_eq!(
        ids(&store, &org, "sort=uri,desc,ignorecase", NOW).await,
        expect(&s, &[6, 4, 5, 0, 1, 3, 2])
    );
    assert_eq!(
        ids(&store, &org, "sort=id,ignorecase", NOW).await,
        expect(&s, &[1, 2, 0, 3, 4, 5, 6])
    );
    assert_eq!(
        ids(&store, &org, "sort=status", NOW).await,
        expect(&s, &[0, 3, 5, 6, 2, 1, 4]),
        "ACTIVE, BLACKLISTED, EXPIRED (at or past expiry) as seen at now"
    );
    assert_eq!(
        ids(&store, &org, "sort=status", 0).await,
        expect(&s, &[0, 1, 3, 4, 5, 6, 2]),
        "nothing has expired at 0"
    );
    assert_eq!(
        ids(&store, &org, "sort=lastUpdateDateTime,desc", NOW).await,
        expect(&s, &[3, 6, 5, 4, 2, 0, 1])
    );
    assert_eq!(
        ids(&store, &org, "sort=expirationTime&page=1&size=3", NOW).await,
        expect(&s, &[3, 0, 2])
    );
    let p = list(&store, &org, "page=2&size=3", NOW).await;
    assert_eq!(p.content.len(), 1);
    assert_eq!(p.content[0].id, s[6]);
    assert_eq!((p.total_elements, p.total_pages), (7, 3));
    assert!(p.last && !p.first);
}

pub async fn every_order_and_page_matches_the_reference(store: Arc<dyn Store>) {
    let (org, s) = seven(&store).await;
    let mut all = Vec::new();
    for id in &s {
        all.push(
            store
                .get_subscription(&OrgId::from(&org), id)
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let mut sorts: Vec<String> = vec![
        String::new(),
        "sort=status,asc&sort=uri,desc".into(),
        "sort=status,uri,desc,ignorecase".into(),
        "sort=expirationTime,desc&sort=id".into(),
        "sort=createdDateTime,id,desc".into(),
    ];
    for property in SORTABLE {
        for suffix in ["", ",desc", ",ignorecase", ",desc,ignorecase"] {
            sorts.push(format!("sort={property}{suffix}"));
        }
    }
    for sort in &sorts {
        for size in [1, 3, 7, MAX_SIZE] {
            for number in 0..=7u64.div_ceil(size) {
                let query = format!("{sort}&size={size}&page={number}");
                let got = list(&store, &org, &query, NOW).await;
                let want = order::sort_and_page(all.clone(), &page(&query), NOW);
                assert_eq!(got, want, "{query}");
            }
        }
    }
}

pub async fn totals_follow_creates_updates_and_deletes(store: Arc<dyn Store>) {
    let org = unique("org");
    let f = filter(&org, "d");
    let empty = list(&store, &org, "", NOW).await;
    assert_eq!((empty.total_elements, empty.total_pages), (0, 0));
    assert!(empty.empty && empty.first && empty.last);
    let mut subs = Vec::new();
    for i in 0..5 {
        let u = upsert(&org, &format!("https://example.com/{i}"), &[&f], 1_000 + i);
        subs.push(store.upsert_subscription(u).await.unwrap().0);
    }
    assert_eq!(list(&store, &org, "size=2", NOW).await.total_elements, 5);
    // An update is no new subscription.
    let u = upsert(&org, "https://example.com/3", &[&f], 9_000);
    assert!(!store.upsert_subscription(u).await.unwrap().1);
    assert_eq!(list(&store, &org, "", NOW).await.total_elements, 5);
    for gone in [&subs[0], &subs[3]] {
        assert!(store
            .delete_subscription(&OrgId::from(&org), &gone.id)
            .await
            .unwrap());
    }
    let left = expect(
        &subs.iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
        &[1, 2, 4],
    );
    for sort in ["", "sort=uri", "sort=createdDateTime,id,desc"] {
        let p = list(&store, &org, &format!("{sort}&size=2"), NOW).await;
        assert_eq!((p.total_elements, p.total_pages), (3, 2), "{sort}");
    }
    assert_eq!(ids(&store, &org, "", NOW).await, left);
    assert_eq!(ids(&store, &org, "size=2&page=1", NOW).await, left[2..]);
    // Created again after a delete: counted and listed once more.
    let u = upsert(&org, "https://example.com/0", &[&f], 10_000);
    let (back, created) = store.upsert_subscription(u).await.unwrap();
    assert!(created);
    let p = list(&store, &org, "", NOW).await;
    assert_eq!(p.total_elements, 4);
    assert_eq!(p.content.last().unwrap().id, back.id);
}

pub async fn lists_are_scoped_to_the_organization(store: Arc<dyn Store>) {
    let (a, b) = (unique("org-a"), unique("org-b"));
    for (org, n) in [(&a, 3), (&b, 2)] {
        for i in 0..n {
            let u = upsert(
                org,
                &format!("https://example.com/{i}"),
                &[&filter(org, "d")],
                1_000,
            );
            store.upsert_subscription(u).await.unwrap();
        }
    }
    for (org, n) in [(&a, 3), (&b, 2)] {
        for sort in ["", "sort=uri,desc"] {
            let p = list(&store, org, sort, NOW).await;
            assert_eq!(p.total_elements, n);
            assert!(p.content.iter().all(|s| s.org_id.as_str() == org.as_str()));
        }
    }
    let nobody = list(&store, &unique("nobody"), "sort=status", NOW).await;
    assert!(nobody.empty && nobody.total_elements == 0);
}

pub async fn size_and_page_edges(store: Arc<dyn Store>) {
    let org = unique("org");
    let f = filter(&org, "d");
    for i in 0..5 {
        let u = upsert(&org, &format!("https://example.com/{i}"), &[&f], 1_000 + i);
        store.upsert_subscription(u).await.unwrap();
    }
    for sort in ["", "sort=uri"] {
        let whole = list(&store, &org, &format!("{sort}&size={MAX_SIZE}"), NOW).await;
        assert_eq!(whole.content.len(), 5);
        assert!(whole.first && whole.last);
        let last = list(&store, &org, &format!("{sort}&size=1&page=4"), NOW).await;
        assert_eq!(last.content, whole.content[4..]);
        assert!(last.last && !last.first);
        for past in [
            "size=1&page=5",
            "size=5&page=1",
            "page=18446744073709551615&size=2000",
            "page=9223372036854775807&size=1",
        ] {
            let p = list(&store, &org, &format!("{sort}&{past}"), NOW).await;
            assert!(p.empty && p.last, "{sort}&{past}");
            assert_eq!(p.total_elements, 5);
        }
    }
}
