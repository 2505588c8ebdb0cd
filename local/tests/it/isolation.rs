//! No tenant slows another, end to end: the real binary (SQLite, or
//! `--backend aws` on DynamoDB Local and moto with WEBHOOKS_TEST_BACKEND=aws),
//! real receivers. Organization A's callback hangs past the delivery timeout
//! with a flood of notifications queued (200 on every commit, 2,000 in the
//! full tier); organization B's healthy callback gets an event every 100 ms
//! meanwhile and gets every one while A is still hung. Then A's callback
//! recovers and gets the whole flood, none lost, none with a new uuid.
//! B's latencies are printed, not asserted: they are measured by
//! `webhooks-bench noisy` (BENCHMARKS.md).

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use http::StatusCode;
use webhook_core::notification::notification_id;

/// Notifications queued for the hung callback, on both backends.
fn flood_size() -> usize {
    testkit::size::scaled(200, 2_000)
}
/// B's notifications must all arrive this long after the last was posted, while A is
/// hung. Were B queued behind A's flood (200 calls that each time out after 2 s), it
/// would wait far longer; isolated, each arrives in milliseconds.
const HEALTHY_WAIT: Duration = Duration::from_secs(15);
const HEALTHY_EVENTS: usize = 100;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

#[tokio::test]
async fn a_hung_callback_does_not_delay_another_organization() {
    let server = Arc::new(Server::start_with(&[
        ("WEBHOOKS_DELIVERY_TIMEOUT_MS", "2000"),
        // Short waits so the recovery is seen within the test; a cool-down
        // as short as the schedule would only churn the queue.
        ("WEBHOOKS_RETRY_SCHEDULE", "1s,1s,1s,1s,1s,1s,1s,1s,1s,1s"),
        ("WEBHOOKS_BREAKER_COOLDOWN", "10s"),
        ("WEBHOOKS_BREAKER_MAX_COOLDOWN", "20s"),
    ]));
    let flood_n = flood_size();
    let hung = Receiver::start(Handshake::Echo).await;
    let healthy = Receiver::start(Handshake::Echo).await;
    let hung_id = subscribe(&server, "org-a", &hung).await;
    let healthy_id = subscribe(&server, "org-b", &healthy).await;
    hung.slow(Duration::from_secs(3600));

    let queued = Instant::now();
    flood(&server, "org-a", "flood", flood_n).await;
    eprintln!(
        "{flood_n} events of org-a accepted in {:?}",
        queued.elapsed()
    );

    // B: one event every 100 ms while A's notifications are queued.
    let mut sent = HashMap::new();
    let mut accepted = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    for i in 0..HEALTHY_EVENTS {
        tick.tick().await;
        let id = format!("healthy-{i}");
        sent.insert(
            notification_id(&id, &healthy_id).to_string(),
            Instant::now(),
        );
        let event = contact_event(&id, "org-b");
        let posting = Instant::now();
        assert_eq!(
            produce(&server, "org-b", &event).await,
            StatusCode::ACCEPTED
        );
        accepted.push(posting.elapsed());
    }
    accepted.sort();
    eprintln!(
        "healthy organization's events accepted in p50 {:?}, max {:?}",
        percentile(&accepted, 0.5),
        accepted.last().unwrap()
    );
    let got = healthy.wait_for_unique(HEALTHY_EVENTS, HEALTHY_WAIT).await;
    let mut latencies: Vec<Duration> = got
        .iter()
        .filter_map(|r| Some(r.at.duration_since(*sent.get(r.header("webhook-id"))?)))
        .collect();
    let slow: Vec<String> = got
        .iter()
        .filter_map(|r| {
            let at = *sent.get(r.header("webhook-id"))?;
            let late = r.at.duration_since(at);
            (late > Duration::from_millis(250))
                .then(|| format!("{:?} after the flood: {late:?}", at.duration_since(queued)))
        })
        .collect();
    eprintln!("slow notifications of the healthy organization: {slow:?}");
    latencies.sort();
    let (p50, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
    eprintln!(
        "healthy organization during the flood: {} received, p50 {p50:?}, p99 {p99:?}, max {:?}",
        latencies.len(),
        latencies.last().unwrap()
    );
    assert_eq!(
        latencies.len(),
        HEALTHY_EVENTS,
        "every notification of B arrives"
    );

    // While it is open, the breaker shows on the subscription.
    let (status, sub) = server
        .get(&format!("/webhooksubscription/{hung_id}"), "org-a")
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_ne!(sub["health"]["state"], "closed", "{sub}");
    assert!(
        sub["health"]["consecutiveFailures"].as_u64().unwrap() >= 5,
        "{sub}"
    );
    assert_eq!(sub["health"]["lastFailure"]["code"], "TIMEOUT", "{sub}");

    // A recovers: every one of its notifications arrives, with the uuid it
    // was given at ingestion.
    hung.slow(Duration::ZERO);
    let recovered = Instant::now();
    let got = hung
        .wait_for_unique(flood_n, Duration::from_secs(180))
        .await;
    eprintln!(
        "org-a's {flood_n} delivered {:?} after recovery",
        recovered.elapsed()
    );
    let expected: HashSet<String> = (0..flood_n)
        .map(|i| notification_id(&format!("flood-{i}"), &hung_id).to_string())
        .collect();
    let arrived: HashSet<String> = got
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert_eq!(arrived, expected);

    let (_, sub) = server
        .get(&format!("/webhooksubscription/{hung_id}"), "org-a")
        .await;
    assert_eq!(sub["health"]["state"], "closed", "{sub}");
    assert_eq!(sub["status"], "ACTIVE", "{sub}");
}
