//! What a store does with a stored value this version does not know: it
//! refuses the item as `StoreError::Corrupt`, naming it by its key, never
//! reads it as a default. The bad value is planted by the adapter's own
//! means (SQL on the file, an `UpdateItem` on the table).

use std::future::Future;
use std::sync::Arc;

use webhook_core::ids::{OrgId, SubscriptionId};
use webhook_core::store::{Store, StoreError};

use super::{filter, unique, upsert};

/// Plants an unknown `status` on one subscription with `plant`, then reads
/// it: refused as corrupt, the key names it, the problem the value.
pub async fn an_unknown_stored_status_is_corrupt<F, P>(store: Arc<dyn Store>, plant: P)
where
    P: FnOnce(OrgId, SubscriptionId, &'static str) -> F,
    F: Future<Output = ()>,
{
    let org = unique("org");
    let (sub, _) = store
        .upsert_subscription(upsert(
            &org,
            "https://cb.example/corrupt",
            &[&filter(&org, "d")],
            1_000,
        ))
        .await
        .unwrap();
    plant(sub.org_id.clone(), sub.id.clone(), "PAUSED").await;
    match store.get_subscription(&sub.org_id, &sub.id).await {
        Err(StoreError::Corrupt { key, problem }) => {
            assert!(
                key.contains(sub.id.as_str()),
                "the key names the item: {key}"
            );
            assert!(problem.contains("status"), "{problem}");
        }
        other => panic!("an unknown status read as {other:?}"),
    }
}
