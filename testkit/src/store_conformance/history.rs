//! The delivery history conformance suite: the same cases on every adapter
//! of `DeliveryHistory` (`store_sqlite.rs`, `store_dynamodb.rs`). Each case
//! works in an organization of its own.

use std::sync::Arc;

use webhook_core::history::{
    AttemptRecord, DeliveryHistory, NotificationStatus, Outcome, Trigger, Window,
};
use webhook_core::ids::{NotificationId, OrgId, SubscriptionId};
use webhook_core::page::PageRequest;
use webhook_core::queue::DeliveryJob;

/// Generates one `#[tokio::test]` per case; `$make` is an async expression
/// giving an `Arc<dyn DeliveryHistory>`.
#[macro_export]
macro_rules! history_conformance_tests {
    ($make:expr) => {
        $crate::history_conformance_tests!(@cases $make;
            enqueued_notifications_are_listed_pending_newest_first,
            outcomes_update_the_summary_and_keep_every_attempt,
            reads_are_scoped_to_organization_and_subscription,
            lists_filter_by_status_and_window_and_page,
            claims_are_marked_pending_once,
            stats_rows_carry_attempt_durations,
            a_timed_notification_enqueued_again_keeps_its_history,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let history: std::sync::Arc<dyn webhook_core::history::DeliveryHistory> = $make.await;
                $crate::store_conformance::history::$case(history).await;
            }
        )*
    };
}

const T0: i64 = 1_760_000_000_000;

struct Fixture {
    org: OrgId,
    sub: SubscriptionId,
}

fn fixture() -> Fixture {
    Fixture {
        org: super::unique("org").into(),
        sub: uuid::Uuid::now_v7().to_string().into(),
    }
}

fn job(f: &Fixture, n: i64) -> DeliveryJob {
    let id = uuid::Uuid::new_v4().to_string();
    DeliveryJob {
        id: NotificationId::from(id.clone()),
        org_id: f.org.clone(),
        subscription_id: f.sub.clone(),
        body: format!(
            r#"{{"uuid":"{id}","timestamp":{},"event":"/orgId/{}/department/d/contact","subscriptionId":"{}","n":{n}}}"#,
            T0 + n,
            f.org,
            f.sub
        ),
        created_at: T0 + n,
        trigger: Trigger::Scheduled,
        attempts: 0,
        not_before: None,
        traceparent: None,
        ordered: false,
        history_attempts: 0,
    }
}

fn attempt(at: i64, status: Option<u16>, code: Option<&str>, trigger: Trigger) -> AttemptRecord {
    AttemptRecord {
        at,
        duration_ms: 40,
        http_status: status,
        code: code.map(str::to_owned),
        response_body: if code.is_some() {
            "<h1>broken</h1>".into()
        } else {
            String::new()
        },
        trigger,
    }
}

fn everything() -> Window {
    Window {
        statuses: vec![],
        since: 0,
        until: i64::MAX,
    }
}

fn page(query: &str) -> PageRequest {
    PageRequest::from_query(Some(query), webhook_core::history::SORTABLE).unwrap()
}

async fn fail(h: &dyn DeliveryHistory, j: &DeliveryJob, at: i64, next: Option<i64>) {
    let status = if next.is_some() {
        NotificationStatus::Pending
    } else {
        NotificationStatus::Failed
    };
    let outcome = Outcome {
        status,
        next_attempt_at: next,
        attempt: Some(attempt(
            at,
            Some(500),
            Some("BAD_STATUS"),
            Trigger::Scheduled,
        )),
        code: None,
    };
    h.record_outcome(j, &outcome).await.unwrap();
}

async fn deliver(h: &dyn DeliveryHistory, j: &DeliveryJob, at: i64, trigger: Trigger) {
    let outcome = Outcome {
        status: NotificationStatus::Delivered,
        next_attempt_at: None,
        attempt: Some(attempt(at, Some(204), None, trigger)),
        code: None,
    };
    h.record_outcome(j, &outcome).await.unwrap();
}

pub async fn enqueued_notifications_are_listed_pending_newest_first(h: Arc<dyn DeliveryHistory>) {
    let f = fixture();
    let jobs: Vec<DeliveryJob> = (0..3).map(|n| job(&f, n)).collect();
    h.record_enqueued("event-1", &jobs).await.unwrap();
    h.record_enqueued("event-1", &jobs).await.unwrap(); // repeated: still three
    let listed = h
        .list(&f.org, &f.sub, &everything(), &page(""))
        .await
        .unwrap();
    assert_eq!(listed.total_elements, 3);
    let ids: Vec<_> = listed.content.iter().map(|s| s.id.clone()).collect();
    assert_eq!(
        ids,
        vec![jobs[2].id.clone(), jobs[1].id.clone(), jobs[0].id.clone()]
    );
    let first = &listed.content[2];
    assert_eq!(first.status, NotificationStatus::Pending);
    assert_eq!((first.attempts, first.created_at), (0, T0));
    assert_eq!(first.event_id, "event-1");
    assert_eq!(
        first.event,
        format!("/orgId/{}/department/d/contact", f.org)
    );
    assert_eq!(first.subscription_id, f.sub);
    assert_eq!(
        (first.last_attempt_at, first.last_http_status),
        (None, None)
    );
}

pub async fn outcomes_update_the_summary_and_keep_every_attempt(h: Arc<dyn DeliveryHistory>) {
    let f = fixture();
    let j = job(&f, 0);
    h.record_enqueued("e", std::slice::from_ref(&j))
        .await
        .unwrap();
    fail(h.as_ref(), &j, T0 + 10, Some(T0 + 5_000)).await;
    let d = h.get(&f.org, &f.sub, &j.id).await.unwrap().unwrap();
    assert_eq!(d.summary.status, NotificationStatus::Pending);
    assert_eq!(d.summary.attempts, 1);
    assert_eq!(d.summary.next_attempt_at, Some(T0 + 5_000));
    assert_eq!(d.summary.last_http_status, Some(500));
    assert_eq!(d.summary.last_code.as_deref(), Some("BAD_STATUS"));
    fail(h.as_ref(), &j, T0 + 5_000, None).await;
    let d = h.get(&f.org, &f.sub, &j.id).await.unwrap().unwrap();
    assert_eq!(
        (d.summary.status, d.summary.attempts),
        (NotificationStatus::Failed, 2)
    );
    assert_eq!(d.summary.next_attempt_at, None);

    deliver(h.as_ref(), &j, T0 + 9_000, Trigger::Manual).await;
    let d = h.get(&f.org, &f.sub, &j.id).await.unwrap().unwrap();
    assert_eq!(d.payload, j.body, "the exact payload");
    assert_eq!(d.summary.status, NotificationStatus::Delivered);
    assert_eq!(d.summary.attempts, 3);
    assert_eq!(d.summary.last_attempt_at, Some(T0 + 9_000));
    assert_eq!(d.summary.last_http_status, Some(204));
    assert_eq!(d.summary.last_code, None);
    assert_eq!(d.attempts.len(), 3);
    assert_eq!(
        d.attempts[0],
        attempt(T0 + 10, Some(500), Some("BAD_STATUS"), Trigger::Scheduled)
    );
    assert_eq!(d.attempts[0].response_body, "<h1>broken</h1>");
    assert_eq!(d.attempts[2].trigger, Trigger::Manual);
    assert!(d.attempts[2].succeeded());

    // An outcome without an attempt (not sent: the subscription is not active).
    let k = job(&f, 1);
    h.record_enqueued("e", std::slice::from_ref(&k))
        .await
        .unwrap();
    let not_sent = Outcome {
        status: NotificationStatus::Failed,
        next_attempt_at: None,
        attempt: None,
        code: Some("SUBSCRIPTION_NOT_ACTIVE".into()),
    };
    h.record_outcome(&k, &not_sent).await.unwrap();
    let d = h.get(&f.org, &f.sub, &k.id).await.unwrap().unwrap();
    assert_eq!(
        (d.summary.status, d.summary.attempts),
        (NotificationStatus::Failed, 0)
    );
    assert_eq!(
        d.summary.last_code.as_deref(),
        Some("SUBSCRIPTION_NOT_ACTIVE")
    );
    assert!(d.attempts.is_empty());

    // An outcome for a notification the history does not have is ignored.
    let unknown = job(&f, 2);
    deliver(h.as_ref(), &unknown, T0, Trigger::Scheduled).await;
    assert_eq!(h.get(&f.org, &f.sub, &unknown.id).await.unwrap(), None);
}

pub async fn reads_are_scoped_to_organization_and_subscription(h: Arc<dyn DeliveryHistory>) {
    let f = fixture();
    let j = job(&f, 0);
    h.record_enqueued("e", std::slice::from_ref(&j))
        .await
        .unwrap();
    let other_org: OrgId = super::unique("org").into();
    let other_sub: SubscriptionId = uuid::Uuid::now_v7().to_string().into();
    assert_eq!(h.get(&other_org, &f.sub, &j.id).await.unwrap(), None);
    assert_eq!(h.get(&f.org, &other_sub, &j.id).await.unwrap(), None);
    assert!(h.get(&f.org, &f.sub, &j.id).await.unwrap().is_some());
    for (org, sub) in [(&other_org, &f.sub), (&f.org, &other_sub)] {
        let listed = h.list(org, sub, &everything(), &page("")).await.unwrap();
        assert_eq!(listed.total_elements, 0);
        assert!(h
            .claims(org, sub, &everything(), 10)
            .await
            .unwrap()
            .is_empty());
        assert!(h
            .stats_rows(org, sub, 0, i64::MAX)
            .await
            .unwrap()
            .is_empty());
    }
}

pub async fn lists_filter_by_status_and_window_and_page(h: Arc<dyn DeliveryHistory>) {
    let f = fixture();
    let jobs: Vec<DeliveryJob> = (0..5).map(|n| job(&f, n * 1_000)).collect();
    h.record_enqueued("e", &jobs).await.unwrap();
    deliver(h.as_ref(), &jobs[0], T0 + 1, Trigger::Scheduled).await;
    fail(h.as_ref(), &jobs[1], T0 + 1, None).await;
    fail(h.as_ref(), &jobs[2], T0 + 1, Some(T0 + 9)).await;
    let with = |statuses: Vec<NotificationStatus>, since: i64, until: i64| Window {
        statuses,
        since,
        until,
    };
    let failed = h
        .list(
            &f.org,
            &f.sub,
            &with(vec![NotificationStatus::Failed], 0, i64::MAX),
            &page(""),
        )
        .await
        .unwrap();
    assert_eq!(failed.content.len(), 1);
    assert_eq!(failed.content[0].id, jobs[1].id);
    let done = with(
        vec![NotificationStatus::Failed, NotificationStatus::Delivered],
        0,
        i64::MAX,
    );
    assert_eq!(
        h.list(&f.org, &f.sub, &done, &page(""))
            .await
            .unwrap()
            .total_elements,
        2
    );
    // since is inclusive, until exclusive.
    let window = with(vec![], T0 + 1_000, T0 + 3_000);
    let listed = h.list(&f.org, &f.sub, &window, &page("")).await.unwrap();
    let ids: Vec<_> = listed.content.iter().map(|s| s.id.clone()).collect();
    assert_eq!(ids, vec![jobs[2].id.clone(), jobs[1].id.clone()]);
    // Pages, and another order.
    let p = h
        .list(&f.org, &f.sub, &everything(), &page("size=2&page=1"))
        .await
        .unwrap();
    assert_eq!(
        (p.total_elements, p.total_pages, p.content.len()),
        (5, 3, 2)
    );
    assert_eq!(p.content[0].id, jobs[2].id);
    let oldest = h
        .list(
            &f.org,
            &f.sub,
            &everything(),
            &page("sort=createdDateTime,asc&size=1"),
        )
        .await
        .unwrap();
    assert_eq!(oldest.content[0].id, jobs[0].id);
    let by_attempts = h
        .list(
            &f.org,
            &f.sub,
            &everything(),
            &page("sort=attempts,desc&size=3"),
        )
        .await
        .unwrap();
    assert!(by_attempts.content.iter().all(|s| s.attempts == 1));
}

pub async fn claims_are_marked_pending_once(h: Arc<dyn DeliveryHistory>) {
    let f = fixture();
    let jobs: Vec<DeliveryJob> = (0..3).map(|n| job(&f, n)).collect();
    h.record_enqueued("e", &jobs).await.unwrap();
    fail(h.as_ref(), &jobs[0], T0 + 1, None).await;
    fail(h.as_ref(), &jobs[1], T0 + 1, None).await;
    deliver(h.as_ref(), &jobs[2], T0 + 1, Trigger::Scheduled).await;
    let failed = Window {
        statuses: vec![NotificationStatus::Failed],
        since: 0,
        until: i64::MAX,
    };
    let claims = h.claims(&f.org, &f.sub, &failed, 10).await.unwrap();
    assert_eq!(claims.len(), 2);
    assert_eq!(claims[0].job.id, jobs[0].id, "oldest first");
    assert_eq!(claims[0].job.body, jobs[0].body);
    assert_eq!(claims[0].job.created_at, jobs[0].created_at);
    assert_eq!(claims[0].job.trigger, Trigger::Manual);
    assert_eq!(
        (claims[0].status, claims[0].attempts),
        (NotificationStatus::Failed, 1)
    );
    assert_eq!(h.claims(&f.org, &f.sub, &failed, 1).await.unwrap().len(), 1);

    assert_eq!(h.mark_pending(&claims, T0 + 50).await.unwrap(), 2);
    assert_eq!(
        h.mark_pending(&claims, T0 + 60).await.unwrap(),
        0,
        "not twice"
    );
    assert!(h
        .claims(&f.org, &f.sub, &failed, 10)
        .await
        .unwrap()
        .is_empty());
    let d = h.get(&f.org, &f.sub, &jobs[0].id).await.unwrap().unwrap();
    assert_eq!(d.summary.status, NotificationStatus::Pending);
    assert_eq!(d.summary.next_attempt_at, Some(T0 + 50));

    // An attempt recorded between the read and the mark wins.
    fail(h.as_ref(), &jobs[0], T0 + 70, None).await;
    let stale = h.claims(&f.org, &f.sub, &failed, 10).await.unwrap();
    deliver(h.as_ref(), &jobs[0], T0 + 80, Trigger::Manual).await;
    assert_eq!(h.mark_pending(&stale, T0 + 90).await.unwrap(), 0);
    let d = h.get(&f.org, &f.sub, &jobs[0].id).await.unwrap().unwrap();
    assert_eq!(d.summary.status, NotificationStatus::Delivered);
}

pub async fn stats_rows_carry_attempt_durations(h: Arc<dyn DeliveryHistory>) {
    let f = fixture();
    let jobs: Vec<DeliveryJob> = (0..2).map(|n| job(&f, n)).collect();
    h.record_enqueued("e", &jobs).await.unwrap();
    fail(h.as_ref(), &jobs[0], T0 + 1, Some(T0 + 2)).await;
    deliver(h.as_ref(), &jobs[0], T0 + 3, Trigger::Scheduled).await;
    let mut rows = h.stats_rows(&f.org, &f.sub, T0, T0 + 10).await.unwrap();
    rows.sort_by_key(|r| r.created_at);
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0].status, rows[0].attempts),
        (NotificationStatus::Delivered, 2)
    );
    assert_eq!(rows[0].durations_ms, vec![40, 40]);
    assert_eq!(
        (rows[1].status, rows[1].attempts),
        (NotificationStatus::Pending, 0)
    );
    assert!(rows[1].durations_ms.is_empty());
    assert!(h
        .stats_rows(&f.org, &f.sub, T0 + 2, T0 + 10)
        .await
        .unwrap()
        .is_empty());
}

/// Issue 39: a notification whose id carries its time (an event of the
/// events queue) enqueued again after its delivery (SQS redelivered the
/// event) is still one notification, its history kept; the repeat's
/// delivery is one more attempt. It is found, resent and recovered by its
/// id alone.
pub async fn a_timed_notification_enqueued_again_keeps_its_history(h: Arc<dyn DeliveryHistory>) {
    let f = fixture();
    let at = T0 + 7;
    let id = webhook_core::notification::notification_id_at("event-t", f.sub.as_str(), at);
    let base = job(&f, 7);
    let j = DeliveryJob {
        id: id.to_string().into(),
        body: base.body.replace(base.id.as_str(), &id.to_string()),
        ..base
    };
    h.record_enqueued("event-t", std::slice::from_ref(&j))
        .await
        .unwrap();
    deliver(&*h, &j, at + 10, Trigger::Scheduled).await;
    h.record_enqueued("event-t", std::slice::from_ref(&j))
        .await
        .unwrap();
    let listed = h
        .list(&f.org, &f.sub, &everything(), &page(""))
        .await
        .unwrap();
    assert_eq!(listed.total_elements, 1);
    let s = &listed.content[0];
    assert_eq!(
        (s.id.as_str(), s.status, s.attempts, s.created_at),
        (j.id.as_str(), NotificationStatus::Delivered, 1, at),
        "enqueued again: the history kept"
    );
    deliver(&*h, &j, at + 20, Trigger::Scheduled).await;
    let detail = h
        .get(&f.org, &f.sub, &j.id)
        .await
        .unwrap()
        .expect("by its id");
    assert_eq!(detail.payload, j.body);
    assert_eq!(
        detail.summary.attempts, 2,
        "the repeat is a further attempt"
    );
    let times: Vec<i64> = detail.attempts.iter().map(|a| a.at).collect();
    assert_eq!(times, [at + 10, at + 20]);
    let claims = h.claims(&f.org, &f.sub, &everything(), 10).await.unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(
        (claims[0].job.id.as_str(), claims[0].job.body.as_str()),
        (j.id.as_str(), j.body.as_str())
    );
}
