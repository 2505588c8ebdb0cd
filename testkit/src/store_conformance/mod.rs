//! The store conformance suite: one set of cases, run against every adapter
//! (`store_sqlite.rs`, `store_dynamodb.rs`), so adapters cannot drift apart.
//! Each case works in organizations of its own, so one store can serve all.

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

// The cases of `conformance_tests!`, by what they cover; the macro names them from here.
mod delivery_health;
mod messages;
mod subscriptions;
pub use delivery_health::*;
pub use messages::*;
pub use subscriptions::*;

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
                $crate::store_conformance::$case(store).await;
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
        payload_filter: None,
        retry_schedule: None,
        custom_headers: None,
    }
}

fn filter(org: &str, dep: &str) -> String {
    format!("/orgId/{org}/department/{dep}/message?direction=inbound")
}
