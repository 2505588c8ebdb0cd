//! The delivery queue conformance suite on the SQLite file, plus what only
//! the embedded queue does (outbox atomicity, dead-letter table, lease release).

use testkit::queue_conformance;

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

testkit::queue_conformance_tests!(queue());

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

/// A job of `subscription` numbered `n`, created in that order.
fn job_of(subscription: &str, n: usize) -> webhook_core::queue::DeliveryJob {
    let mut job = queue_conformance::job(n);
    job.subscription_id = subscription.into();
    job
}

/// Fair at any depth (issue 36): another subscription's job is leased
/// however many older due jobs a subscription at its cap has queued (more
/// than the 20,000 the lease used to look at, at full size).
#[tokio::test]
async fn another_subscriptions_job_is_leased_whatever_depth_sits_ahead() {
    let (_dir, store) = open();
    let depth = testkit::size::scaled(2_000, 25_000);
    let jobs: Vec<_> = (0..depth).map(|n| job_of("busy", n)).collect();
    for chunk in jobs.chunks(5_000) {
        store.enqueue(chunk.to_vec()).await.unwrap();
    }
    let long = std::time::Duration::from_secs(60);
    let held = store.receive(256, 8, long).await.unwrap();
    assert_eq!(held.len(), 8, "the busy subscription takes its cap");
    // Queued after the whole backlog, and due after it.
    store
        .enqueue(vec![job_of("other", depth + 1)])
        .await
        .unwrap();
    let leased = store.receive(256, 8, long).await.unwrap();
    let subs: Vec<_> = leased
        .iter()
        .map(|l| l.job.subscription_id.as_str())
        .collect();
    assert_eq!(subs, ["other"]);
    // The busy subscription's oldest jobs went first, in order.
    let first: Vec<_> = held.iter().map(|l| l.job.id.clone()).collect();
    let expected: Vec<_> = jobs[..8].iter().map(|j| j.id.clone()).collect();
    assert_eq!(first, expected);
}

/// The lease turns over the subscriptions with due work: one lease of one
/// job at a time gives each subscription its turn before any has a second.
#[tokio::test]
async fn leases_take_turns_over_subscriptions() {
    let (_dir, store) = open();
    for (i, sub) in ["a", "b", "c"].iter().enumerate() {
        let jobs = (0..5).map(|n| job_of(sub, i * 10 + n)).collect();
        store.enqueue(jobs).await.unwrap();
    }
    let long = std::time::Duration::from_secs(60);
    let mut turns = Vec::new();
    for _ in 0..6 {
        let leased = store.receive(1, 100, long).await.unwrap();
        assert_eq!(leased.len(), 1);
        turns.push(leased[0].job.subscription_id.to_string());
    }
    assert_eq!(turns, ["a", "b", "c", "a", "b", "c"]);
    // A lease with room for more takes each one's oldest, up to the room.
    let leased = store.receive(100, 3, long).await.unwrap();
    let count = |sub: &str| {
        leased
            .iter()
            .filter(|l| l.job.subscription_id.as_str() == sub)
            .count()
    };
    assert_eq!((count("a"), count("b"), count("c")), (1, 1, 1));
}

/// Ordered delivery (issue 36): an ordered subscription's jobs are leased one at a time, in
/// the order they were accepted; a retry waiting holds the line, a dead letter lets the next
/// one go; another subscription is leased beside it as usual.
#[tokio::test]
async fn an_ordered_subscription_is_leased_one_job_at_a_time_in_acceptance_order() {
    let (_dir, store) = open();
    let filter = "/orgId/org-o/department/d/contact";
    let mut upsert =
        testkit::store_conformance::upsert("org-o", "https://example.com/o", &[filter], 1);
    upsert.ordered = Some(true);
    let (sub, _) = store.upsert_subscription(upsert).await.unwrap();
    assert!(sub.ordered);
    let line: Vec<_> = (0..4).map(|n| job_of(sub.id.as_str(), n)).collect();
    store.enqueue(line.clone()).await.unwrap();
    store
        .enqueue((10..13).map(|n| job_of("other", n)).collect())
        .await
        .unwrap();
    let long = std::time::Duration::from_secs(60);
    let ids = |leases: &[webhook_core::queue::Lease], sub: &str| -> Vec<String> {
        leases
            .iter()
            .filter(|l| l.job.subscription_id.as_str() == sub)
            .map(|l| l.job.id.to_string())
            .collect()
    };
    let first = store.receive(100, 8, long).await.unwrap();
    assert_eq!(ids(&first, sub.id.as_str()), [line[0].id.to_string()]);
    assert_eq!(
        ids(&first, "other").len(),
        3,
        "the unordered one takes its due jobs"
    );
    assert!(
        store.receive(100, 8, long).await.unwrap().is_empty(),
        "nothing more while the head is in flight"
    );

    // A retry waiting holds the line; when due, the same job comes first again.
    let head = first
        .iter()
        .find(|l| l.job.subscription_id == sub.id)
        .unwrap();
    store
        .retry_after(head, std::time::Duration::from_millis(300))
        .await
        .unwrap();
    assert!(store.receive(100, 8, long).await.unwrap().is_empty());
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let again = store.receive(100, 8, long).await.unwrap();
    assert_eq!(ids(&again, sub.id.as_str()), [line[0].id.to_string()]);
    assert_eq!(again[0].attempt, 2);

    // Finally failed: the next in line goes.
    store.dead_letter(&again[0], "test").await.unwrap();
    let next = store.receive(100, 8, long).await.unwrap();
    assert_eq!(ids(&next, sub.id.as_str()), [line[1].id.to_string()]);
    // Delivered: the next.
    store.complete(&next[0]).await.unwrap();
    let after = store.receive(100, 8, long).await.unwrap();
    assert_eq!(ids(&after, sub.id.as_str()), [line[2].id.to_string()]);
}
