//! The delivery queue conformance suite, run against every adapter
//! (`queue_sqlite.rs`, `queue_sqs.rs`). Each case gets a fresh, empty queue.
//! Durations are whole seconds: SQS visibility has one-second granularity.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use webhook_core::ids::NotificationId;
use webhook_core::queue::{DeliveryJob, DeliveryQueue, Lease};

/// A fresh queue, and a reader of what its adapter keeps of the jobs it
/// dead-lettered (the SQLite table, the SQS dead-letter queue): each job as
/// it was (id, subscription, body), with the reason. Read from the adapter's own storage, so a queue
/// that dropped its dead letters fails the suite.
pub struct Harness {
    pub queue: Arc<dyn DeliveryQueue>,
    pub dead_letters: DeadLetters,
}

pub type DeadLetters =
    Box<dyn Fn() -> Pin<Box<dyn Future<Output = Vec<DeadLetter>> + Send>> + Send + Sync>;

#[derive(Debug, PartialEq, Eq)]
pub struct DeadLetter {
    pub id: String,
    pub subscription_id: String,
    pub body: String,
    pub reason: String,
}

#[macro_export]
macro_rules! queue_conformance_tests {
    ($make:expr) => {
        $crate::queue_conformance_tests!(@cases $make;
            received_jobs_are_leased_until_completed,
            an_expired_lease_makes_the_job_visible_again,
            retry_after_delays_the_next_attempt,
            a_deferral_delays_without_counting_an_attempt,
            dead_lettered_jobs_leave_the_queue_for_the_dead_letters,
            large_batches_are_enqueued_whole,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let harness: $crate::queue_conformance::Harness = $make.await;
                $crate::queue_conformance::$case(harness).await;
            }
        )*
    };
}

pub fn job(n: usize) -> DeliveryJob {
    DeliveryJob {
        id: format!("00000000-0000-5000-8000-{n:012}").into(),
        org_id: "org-1".into(),
        subscription_id: "sub-1".into(),
        body: format!(r#"{{"n":{n},"text":"héllo"}}"#),
        created_at: 1_700_000_000_000 + n as i64,
        trigger: Default::default(),
        attempts: 0,
        not_before: None,
        traceparent: None,
        ordered: false,
        history_attempts: 0,
    }
}

/// Receives until `n` leases came back or `limit` passed.
async fn receive_n(
    queue: &dyn DeliveryQueue,
    n: usize,
    visibility: Duration,
    limit: Duration,
) -> Vec<Lease> {
    let start = std::time::Instant::now();
    let mut out = Vec::new();
    while out.len() < n && start.elapsed() < limit {
        out.extend(queue.receive(10, 100, visibility).await.unwrap());
        if out.len() < n {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    out
}

const LONG: Duration = Duration::from_secs(30);

pub async fn received_jobs_are_leased_until_completed(h: Harness) {
    let queue = h.queue;
    queue.enqueue(vec![job(1), job(2), job(3)]).await.unwrap();
    let leases = receive_n(queue.as_ref(), 3, LONG, Duration::from_secs(10)).await;
    assert_eq!(leases.len(), 3);
    let ids: HashSet<NotificationId> = leases.iter().map(|l| l.job.id.clone()).collect();
    assert_eq!(ids, HashSet::from([job(1).id, job(2).id, job(3).id]));
    assert!(leases.iter().all(|l| l.attempt == 1));
    let l1 = leases.iter().find(|l| l.job.id == job(1).id).unwrap();
    assert_eq!(l1.job, job(1), "the job comes back byte for byte");
    assert!(
        queue.receive(10, 100, LONG).await.unwrap().is_empty(),
        "leased jobs are invisible"
    );
    for l in &leases {
        queue.complete(l).await.unwrap();
    }
    assert!(queue.receive(10, 100, LONG).await.unwrap().is_empty());
}

pub async fn an_expired_lease_makes_the_job_visible_again(h: Harness) {
    let queue = h.queue;
    queue.enqueue(vec![job(7)]).await.unwrap();
    let first = receive_n(
        queue.as_ref(),
        1,
        Duration::from_secs(1),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(first.len(), 1);
    // The consumer "crashed": after the lease, the job is back, as attempt 2.
    let again = receive_n(queue.as_ref(), 1, LONG, Duration::from_secs(10)).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].job, job(7));
    assert_eq!(again[0].attempt, 2);
    queue.complete(&again[0]).await.unwrap();
}

pub async fn retry_after_delays_the_next_attempt(h: Harness) {
    let queue = h.queue;
    queue.enqueue(vec![job(8)]).await.unwrap();
    let first = receive_n(queue.as_ref(), 1, LONG, Duration::from_secs(10)).await;
    queue
        .retry_after(&first[0], Duration::from_secs(2))
        .await
        .unwrap();
    assert!(
        queue.receive(10, 100, LONG).await.unwrap().is_empty(),
        "not due yet"
    );
    let again = receive_n(queue.as_ref(), 1, LONG, Duration::from_secs(10)).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempt, 2);
    queue.complete(&again[0]).await.unwrap();
}

/// A job deferred (cap, open breaker) comes back as the same attempt; the
/// attempt after it counts on.
pub async fn a_deferral_delays_without_counting_an_attempt(h: Harness) {
    let queue = h.queue;
    queue.enqueue(vec![job(10)]).await.unwrap();
    let first = receive_n(queue.as_ref(), 1, LONG, Duration::from_secs(10)).await;
    assert_eq!(first[0].attempt, 1);
    queue
        .defer(&first[0], Duration::from_secs(2))
        .await
        .unwrap();
    assert!(
        queue.receive(10, 100, LONG).await.unwrap().is_empty(),
        "not due yet"
    );
    let deferred = receive_n(queue.as_ref(), 1, LONG, Duration::from_secs(10)).await;
    assert_eq!((deferred[0].attempt, &deferred[0].job.id), (1, &job(10).id));
    queue
        .retry_after(&deferred[0], Duration::from_secs(1))
        .await
        .unwrap();
    let retried = receive_n(queue.as_ref(), 1, LONG, Duration::from_secs(10)).await;
    assert_eq!(retried[0].attempt, 2);
    assert_eq!(
        retried[0].job.body,
        job(10).body,
        "the same bytes every attempt"
    );
    queue.complete(&retried[0]).await.unwrap();
}

pub async fn dead_lettered_jobs_leave_the_queue_for_the_dead_letters(h: Harness) {
    let queue = h.queue;
    queue.enqueue(vec![job(9), job(11)]).await.unwrap();
    let first = receive_n(
        queue.as_ref(),
        2,
        Duration::from_secs(1),
        Duration::from_secs(10),
    )
    .await;
    let dead = first.iter().find(|l| l.job.id == job(9).id).unwrap();
    queue.dead_letter(dead, "gave up").await.unwrap();
    let other = first.iter().find(|l| l.job.id == job(11).id).unwrap();
    queue.complete(other).await.unwrap();
    assert_eq!(
        (h.dead_letters)().await,
        vec![DeadLetter {
            id: job(9).id.to_string(),
            subscription_id: job(9).subscription_id.to_string(),
            body: job(9).body,
            reason: "gave up".into(),
        }],
        "the dead letter is kept, byte for byte, with its reason; a completed job is not"
    );
    // Past the first lease (1 s): it does not come back either.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        queue.receive(10, 100, LONG).await.unwrap().is_empty(),
        "a dead letter never comes back"
    );
}

pub async fn large_batches_are_enqueued_whole(h: Harness) {
    let queue = h.queue;
    let jobs: Vec<DeliveryJob> = (0..25).map(job).collect();
    queue.enqueue(jobs.clone()).await.unwrap();
    let leases = receive_n(queue.as_ref(), 25, LONG, Duration::from_secs(20)).await;
    let ids: HashSet<NotificationId> = leases.iter().map(|l| l.job.id.clone()).collect();
    assert_eq!(ids, jobs.iter().map(|j| j.id.clone()).collect());
}
