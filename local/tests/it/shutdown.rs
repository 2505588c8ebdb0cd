//! Graceful shutdown end to end: `webhooks-local` stopped by SIGTERM in
//! the middle of a delivery run lets the calls in flight finish and records
//! them, exits 0 within `WEBHOOKS_SHUTDOWN_GRACE`, and after a restart on
//! the same data every notification has arrived exactly once. A stop that
//! dropped the calls in flight would have them sent again after the
//! restart: the receiver counts a notification when it arrives, before it
//! answers, so those show up twice.
//!
//! The first calls are held until every event is in, so the stop lands in
//! a run that is mostly still queued whatever the backend ingests a second
//! (the emulators ingest slower than 16 calls of 200 ms deliver).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use http::StatusCode;
use serde_json::{json, Value};
use webhook_core::notification::notification_id;

/// The run: 400 notifications, 16 calls in flight, 200 ms each.
const NOTIFICATIONS: usize = 400;
const IN_FLIGHT: usize = 16;
const CALL: Duration = Duration::from_millis(200);
const GRACE: Duration = Duration::from_secs(5);
const WAIT: Duration = Duration::from_secs(60);
/// The delivery timeout: the longest the first calls may be held while the
/// events go in, never given up on (and sent again) meanwhile.
const HOLD: Duration = Duration::from_secs(120);

fn event(i: usize) -> Value {
    json!({"eventId": format!("evt-{i}"), "type": "contact.created", "organizationId": "org-1",
           "departmentId": "dep", "contact": {"id": "contact-7"}})
}

/// Posts events `0..n` with 8 concurrent producers.
async fn ingest(server: Server, n: usize) -> Server {
    let server = Arc::new(server);
    let next = Arc::new(AtomicUsize::new(0));
    let mut producers = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (server, next) = (server.clone(), next.clone());
        producers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    return;
                }
                let accepted = produce(&server, "org-1", &event(i)).await;
                assert_eq!(accepted, StatusCode::ACCEPTED);
            }
        });
    }
    while let Some(done) = producers.join_next().await {
        done.unwrap();
    }
    Arc::into_inner(server).expect("the producers are done")
}

/// Polls the subscription's stats until `done` holds for its totals.
async fn wait_for_totals(server: &Server, sub_id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let (status, stats) = server
            .get(&format!("/webhooksubscription/{sub_id}/stats"), "org-1")
            .await;
        assert_eq!(status, StatusCode::OK, "{stats}");
        if done(&stats["totals"]) {
            return stats["totals"].clone();
        }
        assert!(
            started.elapsed() < WAIT,
            "not there after {WAIT:?}: {}",
            stats["totals"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn sigterm_lets_the_calls_in_flight_finish_and_none_is_sent_twice() {
    let grace = format!("{}s", GRACE.as_secs());
    let cap = IN_FLIGHT.to_string();
    let hold = HOLD.as_millis().to_string();
    let server = Server::start_with(&[
        ("WEBHOOKS_SHUTDOWN_GRACE", &grace),
        ("WEBHOOKS_MAX_IN_FLIGHT_PER_SUBSCRIPTION", &cap),
        // As many slots as the cap: while the first calls are held nothing
        // more is leased (none deferred over the cap, again and again).
        ("WEBHOOKS_DELIVERY_CONCURRENCY", &cap),
        ("WEBHOOKS_DELIVERY_TIMEOUT_MS", &hold),
    ]);
    let receiver = Receiver::start(Handshake::Echo).await;
    receiver.slow(CALL);
    let (status, sub) = server
        .create("org-1", &receiver.uri("/hook"), &[&contact("org-1", "dep")])
        .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    let sub_id = sub["id"].as_str().unwrap().to_owned();
    receiver.hold();
    let ingesting = Instant::now();
    let mut server = ingest(server, NOTIFICATIONS).await;
    let took = ingesting.elapsed();
    assert!(
        took < HOLD - GRACE,
        "ingesting took {took:?}: the held calls may have timed out"
    );
    receiver.release();

    // A second wave of calls is in flight, most of the run still queued.
    let started = Instant::now();
    while receiver.arrived().len() < 2 * IN_FLIGHT {
        assert!(started.elapsed() < WAIT, "deliveries never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (exit, took) = server.terminate(GRACE + Duration::from_secs(5)).await;
    let first_run = receiver.arrived().len();
    eprintln!("SIGTERM: exited {exit} after {took:?}, {first_run} notifications arrived");
    assert!(exit.success(), "{exit}");
    assert!(took < GRACE, "exited after {took:?}");
    assert!(
        first_run < NOTIFICATIONS - IN_FLIGHT,
        "the stop came too late to test anything: {first_run} arrived"
    );

    let server = server.restart();
    let totals = wait_for_totals(&server, &sub_id, |t| {
        t["delivered"] == NOTIFICATIONS && t["pending"] == 0
    })
    .await;
    assert_eq!(totals["notifications"], NOTIFICATIONS, "{totals}");

    let mut times: BTreeMap<String, usize> = BTreeMap::new();
    for id in receiver.arrived() {
        *times.entry(id).or_default() += 1;
    }
    let twice: Vec<_> = times.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "sent more than once: {twice:?}");
    let expected: BTreeSet<String> = (0..NOTIFICATIONS)
        .map(|i| notification_id(&format!("evt-{i}"), &sub_id).to_string())
        .collect();
    assert_eq!(times.into_keys().collect::<BTreeSet<_>>(), expected);
}

#[tokio::test]
async fn calls_still_running_at_the_grace_bound_are_left_to_the_queue() {
    // The calls hang past the grace but not past the delivery timeout.
    let mut server = Server::start_with(&[
        ("WEBHOOKS_SHUTDOWN_GRACE", "1s"),
        ("WEBHOOKS_DELIVERY_TIMEOUT_MS", "3000"),
    ]);
    let receiver = Receiver::start(Handshake::Echo).await;
    receiver.slow(Duration::from_secs(3600));
    let (status, sub) = server
        .create("org-1", &receiver.uri("/hook"), &[&contact("org-1", "dep")])
        .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    let sub_id = sub["id"].as_str().unwrap().to_owned();
    for i in 0..3 {
        assert_eq!(
            produce(&server, "org-1", &event(i)).await,
            StatusCode::ACCEPTED
        );
    }
    let started = Instant::now();
    while receiver.arrived().len() < 3 {
        assert!(started.elapsed() < WAIT, "deliveries never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let (exit, took) = server.terminate(Duration::from_secs(10)).await;
    eprintln!("SIGTERM with 3 calls hanging: exited {exit} after {took:?}");
    assert!(exit.success(), "{exit}");
    assert!(
        (Duration::from_secs(1)..Duration::from_secs(3)).contains(&took),
        "exited after {took:?}"
    );

    // Abandoned, not lost: attempted again after the restart.
    receiver.slow(Duration::ZERO);
    let server = server.restart();
    wait_for_totals(&server, &sub_id, |t| {
        t["delivered"] == 3 && t["pending"] == 0
    })
    .await;
}
