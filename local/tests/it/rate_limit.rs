//! A subscription's rate limit (`rateLimit`, issue 36, its rule issue 44), end to end on
//! both backends (SQLite, or `--backend aws` on DynamoDB Local and moto with
//! WEBHOOKS_TEST_BACKEND=aws):
//!
//! - the field: validated (an integer from 1 to 1000, or 0), shown by create, get and
//!   list, kept by an update that does not name it (or names it `null`), removed by `0`; absent for a
//!   subscription that never had one (the original interface unchanged);
//! - the rule (docs/api.md, "Behaviour", rate limit): in any one second, however it is
//!   cut, at most `rateLimit` requests reach the receiver. A backlog (300 on every commit, 1,000 in the
//!   full tier, at 50 a second; on the AWS backend 60 and 300 at 10: see [`limit`]) is
//!   received, every notification arriving, and the receiver's own clock (each request's
//!   arrival, before its body is read) never counts more than the limit in any window of one
//!   second starting at any arrival; the backlog drains at no more than the limit and at no
//!   less than what the test asserts of each backend.
//!
//! **How the rate is measured.** The backlog is queued behind a receiver's pause (a `429`
//! with `Retry-After`), so that it is all there when deliveries start (ingestion on the
//! emulators is slower than 50 a second). The rate is the least-squares slope of the
//! arrivals' count against their time at the receiver, over each notification's first
//! arrival from one second after the first delivery (on SQS the deferred jobs take that
//! long to come back in their turns) to the 90th percentile (on moto a receive that times
//! out loses its messages until their visibility ends, some 25 s later: a tail that says
//! nothing of the rate).

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use http::StatusCode;
use serde_json::{json, Value};

/// 50 a second (the acceptance) on SQLite. On the AWS backend 10: DynamoDB Local and moto
/// on a shared 2-core machine deliver about 17 a second to a fast callback in all (a delivery
/// there is some ten emulator calls), below 50, so 10 is what proves the limit there.
fn limit() -> u32 {
    if common::aws_backend() {
        10
    } else {
        50
    }
}

/// Creates (or updates) `org`'s subscription of `receiver` with `extra` members in the body.
async fn post(
    server: &Server,
    org: &str,
    receiver: &Receiver,
    extra: Value,
) -> (StatusCode, Value) {
    post_subscription(
        server,
        org,
        &receiver.uri("/hook"),
        contact(org, "dep"),
        extra,
    )
    .await
}

#[tokio::test]
async fn the_rate_limit_is_validated_shown_kept_and_removed_by_0() {
    let server = Server::start();
    let inbox = Receiver::start(Handshake::Echo).await;
    let org = "org-rate-field";

    for bad in [
        json!(1001),
        json!(-5),
        json!("50"),
        json!(2.5),
        json!(true),
        json!([50]),
    ] {
        let (status, body) = post(&server, org, &inbox, json!({"rateLimit": bad})).await;
        assert_invalid(status, &body, "rateLimit", &format!("rateLimit {bad}"));
        let message = body["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains("from 1 to 1000"), "{message}");
    }

    // Without it: no member, as the original interface.
    let (status, plain) = post(&server, org, &inbox, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{plain}");
    assert!(plain.get("rateLimit").is_none(), "{plain}");

    let (status, limited) = post(&server, org, &inbox, json!({"rateLimit": 50})).await;
    assert_eq!(status, StatusCode::OK, "{limited}");
    assert_eq!(limited["rateLimit"], 50);
    assert_eq!(limited["id"], plain["id"], "the same subscription, updated");
    let id = limited["id"].as_str().unwrap();

    let shown = |what: &'static str| {
        let server = &server;
        async move {
            let (_, got) = server.get(&format!("/webhooksubscription/{id}"), org).await;
            let (_, list) = server.get("/webhooksubscription/all", org).await;
            let listed = list["content"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["id"] == id)
                .cloned()
                .unwrap();
            assert_eq!(
                got["rateLimit"], listed["rateLimit"],
                "{what}: get and list agree"
            );
            got["rateLimit"].clone()
        }
    };
    assert_eq!(shown("set").await, 50);
    // An update that does not name it keeps it (a client that only renews).
    let (_, renewed) = post(&server, org, &inbox, json!({"expiresDateInMillies": 0})).await;
    assert_eq!(renewed["rateLimit"], 50, "{renewed}");
    let (_, renewed) = post(&server, org, &inbox, json!({"rateLimit": null})).await;
    assert_eq!(renewed["rateLimit"], 50, "null is absent: {renewed}");
    assert_eq!(shown("kept").await, 50);
    // An integral number is an integer; the bounds are allowed.
    for limit in [json!(1000), json!(1), json!(20.0)] {
        let (status, changed) = post(&server, org, &inbox, json!({"rateLimit": limit})).await;
        assert_eq!(status, StatusCode::OK, "{changed}");
        assert_eq!(changed["rateLimit"].as_f64(), limit.as_f64());
    }
    assert_eq!(shown("changed").await, 20);
    // 0 removes it.
    let (_, removed) = post(&server, org, &inbox, json!({"rateLimit": 0})).await;
    assert!(removed.get("rateLimit").is_none(), "{removed}");
    assert_eq!(shown("removed").await, Value::Null);
}

/// 300 on every commit (6.3 s at 50 a second: the slope after the first second spans five
/// seconds), 1,000 in the full tier (the acceptance); on the AWS backend 60 and 300 (6.3 s
/// and 32 s at 10 a second).
fn backlog_size() -> usize {
    if common::aws_backend() {
        testkit::size::scaled(60, 300)
    } else {
        testkit::size::scaled(300, 1_000)
    }
}

/// The least share of the limit the backlog drains at. The rule's spacing makes the most
/// 1 / 1.1 (90.9 %). SQLite: 80 % (82–91 % measured on a loaded 2-core machine). The AWS
/// backend: half. A job with no slot within the
/// second ahead comes back through SQS's whole-second delay and the poll, late by up to
/// 1.75 s on moto, and on a loaded machine DynamoDB Local answers a reservation in up to
/// 800 ms, after its slot (docs/decisions/rate-limit.md, "Measured").
fn floor() -> f64 {
    if common::aws_backend() {
        0.5
    } else {
        0.8
    }
}

// Two threads: the receiver reads its clock as each request arrives, not when the test's
// thread is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_subscription_never_receives_more_than_its_limit_in_any_second() {
    let limit_per_s = limit();
    let server = Arc::new(Server::start());
    let inbox = Receiver::start(Handshake::Echo).await;
    let org = "org-rate";
    let (status, sub) = post(&server, org, &inbox, json!({"rateLimit": limit_per_s})).await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    let n = backlog_size();
    // The backlog is queued behind a receiver's pause (a 429 with Retry-After on the first
    // notification), so the limit, not the speed of ingestion (slower than 50 a second on
    // the emulators), sets the pace once it ends: the rate of a backlog is what is measured.
    let pause = if common::aws_backend() {
        (n / 5).max(10)
    } else {
        3
    };
    inbox.script(&[(429, Some(&pause.to_string()))]);
    produce(&server, org, &contact_event("rated-first", org)).await;
    inbox.wait_for(1, Duration::from_secs(30)).await;
    let posted = std::time::Instant::now();
    flood(&server, org, "rated", n - 1).await;
    let flooding = posted.elapsed();
    eprintln!(
        "{} events posted in {flooding:?}, behind a pause of {pause} s",
        n - 1
    );
    assert!(
        flooding < Duration::from_secs(pause as u64),
        "the backlog took longer to post than the pause lasts: the machine is too slow for this test"
    );

    let bound = Duration::from_secs((n as u64 / u64::from(limit_per_s)) * 4 + 60);
    let bound = bound + Duration::from_secs(pause as u64);
    inbox.wait_for_unique(n, bound).await;
    // And the retry of the one answered 429 (its first arrival was not a delivery).
    let got = inbox.wait_for(n + 1, bound).await;
    let ids: HashSet<&str> = got.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!(ids.len(), n, "every notification arrives");

    // The rule, by the receiver's clock: every request counts (a retry, a duplicate), and
    // no window of one second, starting at any arrival, holds more than the limit.
    let mut arrivals: Vec<std::time::Instant> = got.iter().map(|r| r.arrived).collect();
    arrivals.sort();
    let k = limit_per_s as usize;
    let tightest = arrivals
        .windows(k + 1)
        .map(|w| w[k] - w[0])
        .min()
        .expect("more arrivals than the limit");
    let crowded = arrivals
        .iter()
        .enumerate()
        .map(|(i, t)| arrivals[i..].partition_point(|u| *u - *t < Duration::from_secs(1)))
        .max()
        .unwrap_or(0);
    eprintln!(
        "{} arrivals; the most in one second: {crowded} (limit {limit_per_s}); {} consecutive span at least {tightest:?}",
        arrivals.len(),
        k + 1
    );
    assert!(
        crowded <= k,
        "{crowded} requests reached the receiver within one second, limit {limit_per_s} ({} consecutive within {tightest:?})",
        k + 1
    );

    // The first arrival of each notification (a duplicate is not a delivery more).
    // The first request, answered 429, was not a delivery.
    let mut first = std::collections::HashMap::new();
    for r in &got[1..] {
        let at = first.entry(r.header("webhook-id")).or_insert(r.arrived);
        *at = r.arrived.min(*at);
    }
    let mut at: Vec<f64> = first
        .values()
        .map(|t| t.duration_since(posted.min(*t)).as_secs_f64())
        .collect();
    assert_eq!(at.len(), n, "every notification is delivered");
    at.sort_by(f64::total_cmp);
    let settled = at.partition_point(|t| *t < at[0] + 1.0);
    let bulk = at.len() * 9 / 10;
    let rate = slope(&at[settled..bulk]);
    let span = at[at.len() - 1] - at[0];
    eprintln!(
        "{n} notifications ({} arrivals with duplicates) over {span:.2} s; from 1 s after the first delivery to the 90th percentile ({} of them): {rate:.2} a second (limit {limit_per_s}, {:.1} %)",
        got.len(),
        bulk - settled,
        100.0 * rate / f64::from(limit_per_s)
    );
    let limit = f64::from(limit_per_s);
    assert!(
        rate <= limit && rate >= floor() * limit,
        "received at {rate:.2} a second, not between {:.0} % of {limit_per_s} and {limit_per_s}",
        floor() * 100.0
    );
}

/// The least-squares slope of the arrivals' count (1, 2, …) against their times (s).
fn slope(times: &[f64]) -> f64 {
    let n = times.len() as f64;
    let mean_t = times.iter().sum::<f64>() / n;
    let mean_i = (n - 1.0) / 2.0;
    let (mut cov, mut var) = (0.0, 0.0);
    for (i, t) in times.iter().enumerate() {
        cov += (t - mean_t) * (i as f64 - mean_i);
        var += (t - mean_t) * (t - mean_t);
    }
    cov / var
}

#[test]
fn the_slope_of_bursts_of_50_a_second_is_50() {
    // Bursts of 50 at 0.3 s into each second, spread over 80 ms: slope 50.
    let times: Vec<f64> = (0..150)
        .map(|i| (i / 50) as f64 + 0.3 + (i % 50) as f64 * 0.0016)
        .collect();
    assert!((slope(&times) - 50.0).abs() < 1.0, "{}", slope(&times));
    // Evenly spaced at 20 ms: 50.
    let even: Vec<f64> = (0..100).map(|i| i as f64 * 0.02).collect();
    assert!((slope(&even) - 50.0).abs() < 1e-6);
}
