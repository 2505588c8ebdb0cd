use super::*;
use crate::failure::CallFailure;

const T0: i64 = 1_800_000_000_000;
const S: i64 = 1000;

fn rule() -> BreakerRule {
    BreakerRule {
        failures: 3,
        window: Duration::from_secs(60),
        cooldown: Duration::from_secs(30),
        max_cooldown: Duration::from_secs(100),
        failing_after: 4,
    }
}

fn outage() -> Signal {
    Signal::Outage(CallFailure::Timeout.into())
}

fn fail(h: &Health, at: i64) -> Health {
    h.after(&outage(), &rule(), at)
        .expect("an outage is counted")
}

#[test]
fn opens_after_a_run_of_outage_failures_within_the_window() {
    let h = fail(&fail(&Health::default(), T0), T0 + S);
    assert_eq!(h.state(T0 + S), BreakerState::Closed);
    assert_eq!(h.failures, 2);
    let h = fail(&h, T0 + 2 * S);
    assert_eq!(
        h.state(T0 + 2 * S),
        BreakerState::Open {
            since: T0 + 2 * S,
            until: T0 + 32 * S
        }
    );
    assert_eq!(h.rev, 3);
}

#[test]
fn a_failure_after_the_window_starts_a_new_run() {
    let h = fail(&fail(&Health::default(), T0), T0 + S);
    let h = fail(&h, T0 + S + 61 * S);
    assert_eq!(
        (h.failures, h.state(T0 + 62 * S)),
        (1, BreakerState::Closed)
    );
}

#[test]
fn answers_that_are_not_outages_reset_the_run_and_neutral_ones_do_not() {
    let h = fail(&fail(&Health::default(), T0), T0 + S);
    let neutral = h.after(&Signal::Neutral, &rule(), T0 + 2 * S).unwrap();
    assert_eq!((neutral.failures, neutral.streak.failures), (2, 3));
    let reset = h.after(&Signal::Reachable, &rule(), T0 + 2 * S).unwrap();
    assert_eq!(reset.failures, 0);
    assert_eq!(
        reset.last_failure.map(|f| f.to_string()).as_deref(),
        Some("TIMEOUT")
    );
    assert_eq!(reset.state(T0 + 2 * S), BreakerState::Closed);
    assert_eq!(reset.streak.failures, 3, "a 4xx is still a failed attempt");
    let delivered = reset
        .after(&Signal::Delivered, &rule(), T0 + 3 * S)
        .unwrap();
    assert!(delivered.is_clear());
    assert_eq!(delivered.after(&Signal::Delivered, &rule(), T0), None);
}

/// A streak of any failures makes the subscription failing once, at
/// `failing_after` or when the breaker opens; a delivery ends it.
#[test]
fn a_failing_streak_is_told_once_and_ends_with_a_delivery() {
    let rule = BreakerRule {
        failing_after: 4,
        failures: 10,
        ..rule()
    };
    let mut h = Health::default();
    for i in 0..3 {
        let next = h.after(&Signal::Reachable, &rule, T0 + i * S).unwrap();
        assert_eq!(next.failing_change(&h), None, "failure {}", i + 1);
        h = next;
    }
    assert_eq!((h.streak.failures, h.streak.since), (3, Some(T0)));
    let fourth = h
        .after(
            &Signal::Outage(CallFailure::Timeout.into()),
            &rule,
            T0 + 3 * S,
        )
        .unwrap();
    assert_eq!(fourth.failing_change(&h), Some(true));
    let fifth = fourth.after(&Signal::Reachable, &rule, T0 + 4 * S).unwrap();
    assert_eq!(fifth.failing_change(&fourth), None, "told once per streak");
    let recovered = fifth.after(&Signal::Delivered, &rule, T0 + 5 * S).unwrap();
    assert_eq!(recovered.failing_change(&fifth), Some(false));
    assert!(recovered.streak.is_clear());
    // The breaker opening makes it failing before `failing_after`.
    let opens = BreakerRule {
        failures: 2,
        ..rule
    };
    let one = Health::default().after(&outage(), &opens, T0).unwrap();
    let two = one.after(&outage(), &opens, T0 + S).unwrap();
    assert!(matches!(two.state(T0 + S), BreakerState::Open { .. }));
    assert_eq!(two.failing_change(&one), Some(true));
}

/// closed → open → half-open → closed, and half-open → open (for twice
/// as long, up to the maximum) on a failed probe.
#[test]
fn transitions_on_a_moved_clock() {
    let mut h = Health::default();
    for i in 0..3 {
        h = fail(&h, T0 + i * S);
    }
    let opened = T0 + 2 * S;
    assert!(matches!(
        h.state(opened + 29 * S),
        BreakerState::Open { .. }
    ));
    // While open, scheduled jobs wait past the cool-down, spread over half of it.
    assert_eq!(h.wait_until(opened + S, 0.0, false), Some(opened + 30 * S));
    assert_eq!(h.wait_until(opened + S, 1.0, false), Some(opened + 45 * S));
    assert_eq!(
        h.claim_probe(opened + S, Duration::from_secs(5), false),
        None
    );
    // Half-open: one probe.
    let at = opened + 30 * S;
    assert_eq!(
        h.state(at),
        BreakerState::HalfOpen {
            since: opened,
            probing: false
        }
    );
    assert_eq!(h.wait_until(at, 0.5, false), None);
    let probing = h.claim_probe(at, Duration::from_secs(5), false).unwrap();
    assert_eq!(
        probing.state(at + S),
        BreakerState::HalfOpen {
            since: opened,
            probing: true
        }
    );
    assert_eq!(
        probing.claim_probe(at + S, Duration::from_secs(5), false),
        None
    );
    assert_eq!(probing.wait_until(at + S, 0.0, false), Some(at + 5 * S));
    // A failed probe opens it again for 60 s, then 100 s (the maximum).
    let reopened = fail(&probing, at + 2 * S);
    assert_eq!(
        reopened.state(at + 2 * S),
        BreakerState::Open {
            since: at + 2 * S,
            until: at + 62 * S
        }
    );
    let again = fail(
        &reopened
            .claim_probe(at + 62 * S, Duration::from_secs(5), false)
            .unwrap(),
        at + 63 * S,
    );
    assert_eq!(again.open_until, Some(at + 163 * S));
    // A successful probe closes it.
    let closed = again
        .after(&Signal::Reachable, &rule(), at + 164 * S)
        .unwrap();
    assert_eq!(closed.state(at + 164 * S), BreakerState::Closed);
    assert_eq!((closed.failures, closed.cooldown_ms), (0, 0));
}

#[test]
fn a_manual_resend_probes_at_once_while_open() {
    let mut h = Health::default();
    for i in 0..3 {
        h = fail(&h, T0 + i * S);
    }
    let now = T0 + 3 * S;
    assert_eq!(h.wait_until(now, 0.0, true), None);
    let probing = h.claim_probe(now, Duration::from_secs(5), true).unwrap();
    // Only one at a time: a second manual job waits for the probe.
    assert_eq!(
        probing.claim_probe(now + S, Duration::from_secs(5), true),
        None
    );
    assert_eq!(probing.wait_until(now + S, 0.0, true), Some(now + 5 * S));
}

#[test]
fn failures_of_calls_in_flight_when_it_opened_only_count() {
    let mut h = Health::default();
    for i in 0..3 {
        h = fail(&h, T0 + i * S);
    }
    let late = fail(&h, T0 + 4 * S);
    assert_eq!(late.open_until, h.open_until);
    assert_eq!(late.failures, 4);
}

#[test]
fn stored_form_is_small_and_round_trips() {
    let h = fail(&Health::default(), T0);
    let json = serde_json::to_string(&h).unwrap();
    assert_eq!(
        json,
        r#"{"rev":1,"failures":1,"lastFailureAt":1800000000000,"lastFailure":"TIMEOUT","cooldownMs":0,"streak":{"failures":1,"since":1800000000000}}"#
    );
    assert_eq!(serde_json::from_str::<Health>(&json).unwrap(), h);
    assert_eq!(
        serde_json::from_str::<Health>("{}").unwrap(),
        Health::default()
    );
}

/// A receiver's pause (issue 36): the later of two pauses holds, jobs wait
/// past it spread over a tenth of what is left (at most a second), and the
/// breaker's transitions keep it.
#[test]
fn a_receivers_pause_holds_until_its_end_whatever_the_breaker_does() {
    let h = Health::default().pause(T0 + 2 * S);
    assert_eq!((h.rev, h.paused(T0)), (1, Some(T0 + 2 * S)));
    assert_eq!(
        h.pause(T0 + S).paused_until,
        Some(T0 + 2 * S),
        "the later holds"
    );
    assert_eq!(h.pause_wait(T0, 0.0), Some(T0 + 2 * S));
    assert_eq!(h.pause_wait(T0, 1.0), Some(T0 + 2 * S + 200));
    assert_eq!(h.pause_wait(T0 + 2 * S, 0.5), None, "over");
    let long = Health::default().pause(T0 + 600 * S);
    assert_eq!(
        long.pause_wait(T0, 1.0),
        Some(T0 + 601 * S),
        "spread at most 1 s"
    );
    // An outage counted, then a success that clears the breaker: still paused.
    let failed = fail(&h, T0);
    assert_eq!(failed.paused(T0), Some(T0 + 2 * S));
    let cleared = failed.after(&Signal::Delivered, &rule(), T0 + S).unwrap();
    assert_eq!(
        (cleared.failures, cleared.paused(T0 + S)),
        (0, Some(T0 + 2 * S))
    );
    // Stored as an additive field, absent when never paused.
    assert!(!serde_json::to_string(&Health::default())
        .unwrap()
        .contains("paused"));
    assert!(serde_json::to_string(&h)
        .unwrap()
        .contains("\"pausedUntil\""));
}
