//! The delivery queue conformance suite on the SQLite file, plus what only
//! the embedded queue does (outbox atomicity, dead-letter table, lease release).

use crate::queue_conformance;

use std::sync::Arc;

use webhook_core::ids::OrgId;
use webhook_core::queue::{DeliveryQueue, Outbox};
use webhook_core::sqlite::SqliteDb;
use webhook_core::store::Store;

fn open() -> (tempfile::TempDir, SqliteDb) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteDb::open(&dir.path().join("queue.db")).unwrap();
    (dir, store)
}

async fn queue() -> queue_conformance::Harness {
    let (dir, store) = open();
    let file = dir.path().join("queue.db");
    std::mem::forget(dir); // the file must outlive the test
    queue_conformance::Harness {
        queue: Arc::new(store),
        // The dead_letters table, read by a connection of the test's own.
        dead_letters: Box::new(move || {
            let conn = rusqlite::Connection::open(&file).unwrap();
            let mut query = conn
                .prepare("SELECT id, subscription_id, body, reason FROM dead_letters ORDER BY id")
                .unwrap();
            let rows = query
                .query_map([], |r| {
                    Ok(queue_conformance::DeadLetter {
                        id: r.get(0)?,
                        subscription_id: r.get(1)?,
                        body: r.get(2)?,
                        reason: r.get(3)?,
                    })
                })
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            Box::pin(std::future::ready(rows))
        }),
    }
}

queue_conformance_tests!(queue());

/// Due jobs are leased fairly across subscriptions, at most the cap per
/// subscription counting the leases it holds: a flood of one subscription
/// waits unleased while another's job goes first.
#[tokio::test]
async fn leases_are_fair_across_subscriptions_and_capped() {
    let (_dir, store) = open();
    let of = |sub: &str, n: usize| {
        let mut job = queue_conformance::job(n);
        job.subscription_id = sub.into();
        job
    };
    let flood: Vec<_> = (0..50).map(|n| of("noisy", n)).collect();
    store.enqueue(flood).await.unwrap();
    store.enqueue(vec![of("quiet", 100)]).await.unwrap();
    let long = std::time::Duration::from_secs(60);
    let first = store.receive(10, 4, long).await.unwrap();
    let count = |leases: &[webhook_core::queue::Lease], sub: &str| {
        leases
            .iter()
            .filter(|l| l.job.subscription_id.as_str() == sub)
            .count()
    };
    assert_eq!((count(&first, "noisy"), count(&first, "quiet")), (4, 1));
    // The noisy subscription holds its cap: nothing more of it is leased.
    assert!(store.receive(10, 4, long).await.unwrap().is_empty());
    store.complete(&first[0]).await.unwrap();
    let freed = first
        .iter()
        .find(|l| l.job.subscription_id.as_str() == "noisy")
        .unwrap();
    store.complete(freed).await.unwrap();
    assert_eq!(
        count(&store.receive(10, 4, long).await.unwrap(), "noisy"),
        1
    );
}

#[tokio::test]
async fn outbox_commits_message_and_jobs_once_per_event() {
    let (_dir, store) = open();
    let message = webhook_core::model::Message {
        id: "m1".into(),
        owner: None,
        time: None,
        direction: "in".into(),
        to: vec![],
        from: String::new(),
        text: "t".into(),
        media: vec![],
        attachments: vec![],
    };
    let jobs = vec![queue_conformance::job(1), queue_conformance::job(2)];
    assert!(store
        .commit(&OrgId::from("org-1"), "evt-1", Some(&message), jobs.clone())
        .await
        .unwrap());
    assert!(
        !store
            .commit(&OrgId::from("org-1"), "evt-1", Some(&message), jobs.clone())
            .await
            .unwrap(),
        "duplicate event"
    );
    // The same event id in another organization is another event.
    assert!(store
        .commit(&OrgId::from("org-2"), "evt-1", None, vec![])
        .await
        .unwrap());
    assert_eq!(
        store
            .get_message(&OrgId::from("org-1"), "m1", i64::MIN)
            .await
            .unwrap(),
        Some(message)
    );
    assert_eq!(store.queue_stats().await.unwrap().pending, 2);
}

#[tokio::test]
async fn dead_letters_are_kept_and_leases_released_on_restart() {
    let (dir, store) = open();
    store
        .enqueue(vec![queue_conformance::job(1), queue_conformance::job(2)])
        .await
        .unwrap();
    let leases = store
        .receive(10, 100, std::time::Duration::from_secs(3600))
        .await
        .unwrap();
    store.dead_letter(&leases[0], "gave up").await.unwrap();
    let stats = store.queue_stats().await.unwrap();
    assert_eq!((stats.pending, stats.dead_letters), (1, 1));
    drop(store);
    // A new process on the same file: the job leased by the dead one is due again.
    let reopened = SqliteDb::open(&dir.path().join("queue.db")).unwrap();
    assert!(reopened
        .receive(10, 100, std::time::Duration::from_secs(60))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(reopened.release_leases().await.unwrap(), 1);
    let again = reopened
        .receive(10, 100, std::time::Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!((again.len(), again[0].attempt), (1, 2));
    // A stale lease cannot complete the job another consumer now holds.
    reopened.complete(&leases[1]).await.unwrap();
    assert_eq!(reopened.queue_stats().await.unwrap().pending, 1);
    // The current one does, with no outcome recorded before it.
    reopened.complete(&again[0]).await.unwrap();
    assert_eq!(reopened.queue_stats().await.unwrap().pending, 0);
}
