//! Conformance cases for signing-secret rotation (`Store::rotate_secret`):
//! the same rules on every adapter.

use std::sync::Arc;

use webhook_core::ids::{OrgId, SubscriptionId};
use webhook_core::page::{PageRequest, MAX_SIZE};
use webhook_core::secret::new_signing_secret;
use webhook_core::store::{SecretRotation, Store, StoreError, MAX_PREVIOUS_SECRETS};

use super::{filter, unique, upsert};

/// One `#[tokio::test]` per rotation case for an adapter.
#[macro_export]
macro_rules! secret_conformance_tests {
    ($make:expr) => {
        $crate::secret_conformance_tests!(@cases $make;
            rotation_keeps_the_old_secret_for_its_grace_period,
            expired_previous_secrets_are_dropped_and_grace_zero_keeps_none,
            at_most_ten_previous_secrets_are_valid,
            a_secret_cannot_be_rotated_to_one_it_has,
            rotation_is_scoped_to_the_organization,
            fan_out_and_updates_see_the_rotated_secrets,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let store: std::sync::Arc<dyn webhook_core::store::Store> = $make.await;
                $crate::store_conformance::secrets::$case(store).await;
            }
        )*
    };
}

fn rotation(grace_ms: i64, now: i64) -> SecretRotation {
    SecretRotation {
        new_secret: new_signing_secret(),
        grace_ms,
        now,
    }
}

async fn created(store: &Arc<dyn Store>, org: &str) -> (OrgId, SubscriptionId, String) {
    let (sub, _) = store
        .upsert_subscription(upsert(
            org,
            "https://example.com/rotate",
            &[&filter(org, "d")],
            1_000,
        ))
        .await
        .unwrap();
    assert!(sub.previous_secrets.is_empty());
    (OrgId::from(org), sub.id, sub.secret)
}

pub async fn rotation_keeps_the_old_secret_for_its_grace_period(store: Arc<dyn Store>) {
    let org = unique("org");
    let (org_id, id, first) = created(&store, &org).await;
    let r = rotation(60_000, 2_000);
    let rotated = store
        .rotate_secret(&org_id, &id, r.clone())
        .await
        .unwrap()
        .expect("the subscription exists");
    assert_eq!(rotated.secret, r.new_secret);
    assert_eq!(rotated.previous_secrets.len(), 1);
    assert_eq!(rotated.previous_secrets[0].secret, first);
    assert_eq!(rotated.previous_secrets[0].expires_at, 62_000);
    assert_eq!(rotated.updated_at, 2_000);
    assert_eq!(rotated.created_at, 1_000);
    let read = store.get_subscription(&org_id, &id).await.unwrap().unwrap();
    assert_eq!(read, rotated, "what rotate answers is what is stored");
    let signing: Vec<&str> = read.signing_secrets(61_999).collect();
    assert_eq!(signing, [r.new_secret.as_str(), first.as_str()]);
    let signing: Vec<&str> = read.signing_secrets(62_000).collect();
    assert_eq!(signing, [r.new_secret.as_str()], "the grace period ended");
}

pub async fn expired_previous_secrets_are_dropped_and_grace_zero_keeps_none(store: Arc<dyn Store>) {
    let org = unique("org");
    let (org_id, id, _) = created(&store, &org).await;
    let first = store
        .rotate_secret(&org_id, &id, rotation(1_000, 2_000))
        .await
        .unwrap()
        .unwrap();
    // At 5_000 the first replaced secret (valid until 3_000) is gone; the
    // current one is replaced without grace: no previous secret is left.
    let second = store
        .rotate_secret(&org_id, &id, rotation(0, 5_000))
        .await
        .unwrap()
        .unwrap();
    assert!(second.previous_secrets.is_empty(), "{second:?}");
    assert_ne!(second.secret, first.secret);
    let third = store
        .rotate_secret(&org_id, &id, rotation(10_000, 6_000))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(third.previous_secrets.len(), 1);
    assert_eq!(third.previous_secrets[0].secret, second.secret);
}

pub async fn at_most_ten_previous_secrets_are_valid(store: Arc<dyn Store>) {
    let org = unique("org");
    let (org_id, id, _) = created(&store, &org).await;
    for i in 0..MAX_PREVIOUS_SECRETS as i64 {
        let sub = store
            .rotate_secret(&org_id, &id, rotation(1_000_000, 2_000 + i))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(sub.previous_secrets.len(), i as usize + 1);
    }
    let before = store.get_subscription(&org_id, &id).await.unwrap().unwrap();
    let refused = store
        .rotate_secret(&org_id, &id, rotation(1_000_000, 3_000))
        .await;
    assert!(
        matches!(refused, Err(StoreError::TooManySecrets(10))),
        "{refused:?}"
    );
    let after = store.get_subscription(&org_id, &id).await.unwrap().unwrap();
    assert_eq!(after, before, "a refused rotation changes nothing");
    // Without a grace period the current secret is not kept: allowed.
    let no_grace = store
        .rotate_secret(&org_id, &id, rotation(0, 3_000))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(no_grace.previous_secrets.len(), MAX_PREVIOUS_SECRETS);
    // Once the old ones expire, rotation with a grace period works again.
    let later = store
        .rotate_secret(&org_id, &id, rotation(1_000, 2_000_000))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(later.previous_secrets.len(), 1);
}

pub async fn a_secret_cannot_be_rotated_to_one_it_has(store: Arc<dyn Store>) {
    let org = unique("org");
    let (org_id, id, first) = created(&store, &org).await;
    let same = SecretRotation {
        new_secret: first.clone(),
        grace_ms: 1_000,
        now: 2_000,
    };
    assert!(matches!(
        store.rotate_secret(&org_id, &id, same).await,
        Err(StoreError::SecretReused)
    ));
    store
        .rotate_secret(&org_id, &id, rotation(60_000, 2_000))
        .await
        .unwrap()
        .unwrap();
    let back = SecretRotation {
        new_secret: first.clone(),
        grace_ms: 0,
        now: 3_000,
    };
    assert!(
        matches!(
            store.rotate_secret(&org_id, &id, back.clone()).await,
            Err(StoreError::SecretReused)
        ),
        "a previous secret still in its grace period"
    );
    // Once it has expired it may come back.
    let back_later = SecretRotation {
        now: 70_000,
        ..back
    };
    let sub = store
        .rotate_secret(&org_id, &id, back_later)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(sub.secret, first);
}

pub async fn rotation_is_scoped_to_the_organization(store: Arc<dyn Store>) {
    let org = unique("org");
    let (org_id, id, first) = created(&store, &org).await;
    let other = OrgId::from(unique("org"));
    assert_eq!(
        store
            .rotate_secret(&other, &id, rotation(1_000, 2_000))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .rotate_secret(
                &org_id,
                &SubscriptionId::from("missing"),
                rotation(1_000, 2_000)
            )
            .await
            .unwrap(),
        None
    );
    let sub = store.get_subscription(&org_id, &id).await.unwrap().unwrap();
    assert_eq!(sub.secret, first);
    assert!(sub.previous_secrets.is_empty());
}

pub async fn fan_out_and_updates_see_the_rotated_secrets(store: Arc<dyn Store>) {
    let org = unique("org");
    let (org_id, id, first) = created(&store, &org).await;
    let rotated = store
        .rotate_secret(&org_id, &id, rotation(60_000, 2_000))
        .await
        .unwrap()
        .unwrap();
    let fanned = store
        .subscriptions_for_filter(&filter(&org, "d"))
        .await
        .unwrap();
    assert_eq!(fanned.len(), 1);
    assert_eq!(fanned[0].secret, rotated.secret);
    assert_eq!(fanned[0].previous_secrets, rotated.previous_secrets);
    // An update (the same uri posted again) keeps both, and the new filter's
    // index entry carries them too.
    let (updated, created) = store
        .upsert_subscription(upsert(
            &org,
            "https://example.com/rotate",
            &[&filter(&org, "d"), &filter(&org, "e")],
            3_000,
        ))
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(updated.secret, rotated.secret);
    assert_eq!(updated.previous_secrets[0].secret, first);
    let fanned = store
        .subscriptions_for_filter(&filter(&org, "e"))
        .await
        .unwrap();
    assert_eq!(fanned[0].previous_secrets, rotated.previous_secrets);
    let listed = store
        .list_subscriptions(&org_id, &PageRequest::first(MAX_SIZE), 0)
        .await
        .unwrap()
        .content;
    assert_eq!(listed[0].previous_secrets, rotated.previous_secrets);
}
