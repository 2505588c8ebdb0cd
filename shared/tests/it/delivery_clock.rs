//! Expiry, blacklisting and retry timing on a clock the test moves by hand:
//! the real delivery pipeline on a real SQLite file, a callback that refuses
//! connections, and no sleeps.

use std::sync::Arc;
use std::time::Duration;

use webhook_core::api::subscriptions::render;
use webhook_core::clock::{Clock, ManualClock};
use webhook_core::delivery::{self, Reason, Verdict};
use webhook_core::destinations::{
    external_id, Destination, DestinationMessage, Destinations, Refusal, Sent, ServiceFault,
};
use webhook_core::failure::CallFailure;
use webhook_core::ids::{OrgId, SubscriptionId};
use webhook_core::model::SubscriptionStatus;
use webhook_core::queue::{DeliveryJob, DeliveryQueue, Lease};
use webhook_core::sqlite::SqliteDb;
use webhook_core::store::{Store, Upsert};
use webhook_core::{App, Config, Profile};

const ORG: &str = "org-1";

fn org() -> OrgId {
    ORG.into()
}
const T0: i64 = 1_800_000_000_000;
const HOUR: Duration = Duration::from_secs(3600);

struct World {
    app: App,
    db: Arc<SqliteDb>,
    clock: Arc<ManualClock>,
    _dir: tempfile::TempDir,
}

/// Retries after 1 minute, then 1 hour; blacklisted after 2 hours of failures.
fn world() -> World {
    let clock = ManualClock::at(T0);
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        SqliteDb::open(&dir.path().join("webhooks.db"))
            .unwrap()
            .with_clock(clock.clone()),
    );
    let config = Config::from_lookup(Profile::Local, |var| match var {
        "WEBHOOKS_RETRY_SCHEDULE" => Some("1m,1h,1h,1h".into()),
        "WEBHOOKS_BLACKLIST_AFTER" => Some("2h".into()),
        _ => None,
    })
    .unwrap();
    World {
        app: App::new(config, db.clone()).with_clock(clock.clone()),
        db,
        clock,
        _dir: dir,
    }
}

/// A loopback port nothing listens on: every POST fails with CONNECT_FAILED.
fn refusing_uri() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}/hook")
}

async fn subscribe(w: &World, uri: &str, lifetime: Duration) -> SubscriptionId {
    let now = w.clock.now_ms();
    let (sub, _) =
        w.db.upsert_subscription(Upsert {
            org_id: ORG.into(),
            uri: uri.into(),
            event_filters: vec!["/orgId/org-1/department/d/contact".into()],
            disabled_filters: vec![],
            expires_at: now + lifetime.as_millis() as i64,
            now,
            new_id: uuid::Uuid::now_v7().to_string().into(),
            new_secret: webhook_core::secret::new_signing_secret(),
            max_per_org: 100,
            ordered: None,
            rate_limit: None,
            role_arn: None,
            external_id: None,
            payload_filter: None,
            retry_schedule: None,
            custom_headers: None,
        })
        .await
        .unwrap();
    sub.id
}

async fn enqueue(w: &World, subscription_id: &SubscriptionId) {
    let job = DeliveryJob {
        id: uuid::Uuid::new_v4().to_string().into(),
        org_id: ORG.into(),
        subscription_id: subscription_id.clone(),
        body: "{}".into(),
        created_at: 0,
        trigger: Default::default(),
        attempts: 0,
        not_before: None,
        traceparent: None,
        ordered: false,
        history_attempts: 0,
    };
    w.db.enqueue(vec![job]).await.unwrap();
}

async fn due(w: &World) -> Vec<Lease> {
    w.db.receive(10, 100, Duration::from_secs(30))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_retry_is_due_exactly_when_the_schedule_says() {
    let w = world();
    let id = subscribe(&w, &refusing_uri(), 24 * HOUR).await;
    enqueue(&w, &id).await;
    let lease = due(&w).await.pop().expect("due at once");
    let verdict = delivery::deliver(&w.app, w.db.as_ref(), w.db.as_ref(), &lease)
        .await
        .unwrap();
    let Verdict::Retry { at, reason } = verdict else {
        panic!("{verdict:?}")
    };
    assert_eq!(reason.to_string(), "CONNECT_FAILED");
    // One minute, ±20 % jitter.
    assert!((T0 + 48_000..=T0 + 72_000).contains(&at), "{}", at - T0);

    w.clock.set(at - 1);
    assert!(due(&w).await.is_empty(), "due before its time");
    w.clock.set(at);
    let again = due(&w).await;
    assert_eq!(again.len(), 1, "not due at its time");
    assert_eq!(again[0].attempt, 2);
}

/// Attempt number `n` of a fresh notification for the subscription.
async fn attempt(w: &World, subscription_id: &SubscriptionId, n: u32) -> Verdict {
    enqueue(w, subscription_id).await;
    let mut lease = due(w).await.pop().expect("due");
    lease.attempt = n;
    delivery::deliver(&w.app, w.db.as_ref(), w.db.as_ref(), &lease)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_failure_streak_longer_than_the_limit_blacklists() {
    let w = world();
    let id = subscribe(&w, &refusing_uri(), 24 * HOUR).await;
    assert!(matches!(attempt(&w, &id, 1).await, Verdict::Retry { .. }));
    w.clock.advance(HOUR);
    assert!(
        matches!(attempt(&w, &id, 2).await, Verdict::Retry { .. }),
        "an hour of failures is within the limit"
    );
    w.clock.advance(HOUR);
    assert_eq!(
        attempt(&w, &id, 3).await,
        Verdict::Blacklist(Reason::Blacklisted(CallFailure::ConnectFailed.into()))
    );
    let sub = w.db.get_subscription(&org(), &id).await.unwrap().unwrap();
    assert_eq!(sub.status, SubscriptionStatus::Blacklisted);
    assert_eq!(sub.failing_since, Some(T0));
    assert_eq!(w.db.queue_stats().await.unwrap().dead_letters, 1);
    // Later notifications of a blacklisted subscription are dropped unsent.
    assert_eq!(
        attempt(&w, &id, 1).await,
        Verdict::Drop(Reason::NotActive(SubscriptionStatus::Blacklisted))
    );
}

#[tokio::test]
async fn an_expired_subscription_is_shown_expired_and_not_delivered() {
    let w = world();
    let id = subscribe(&w, &refusing_uri(), HOUR).await;
    let sub = w.db.get_subscription(&org(), &id).await.unwrap().unwrap();
    assert_eq!(
        render(&sub, w.clock.now_ms(), "webhooks").status,
        SubscriptionStatus::Active
    );
    assert_eq!(
        render(&sub, w.clock.now_ms(), "webhooks").expires_in,
        3_600_000
    );

    w.clock.advance(HOUR);
    let shown = render(&sub, w.clock.now_ms(), "webhooks");
    assert_eq!(
        (shown.status, shown.expires_in),
        (SubscriptionStatus::Expired, 0)
    );
    enqueue(&w, &id).await;
    let lease = due(&w).await.pop().expect("due");
    assert_eq!(
        delivery::deliver(&w.app, w.db.as_ref(), w.db.as_ref(), &lease)
            .await
            .unwrap(),
        Verdict::Drop(Reason::Expired)
    );
    assert_eq!(
        w.db.queue_stats().await.unwrap().pending,
        0,
        "dropped, not kept"
    );
}

/// History through the pipeline: ingestion records PENDING, each attempt is
/// kept; past `WEBHOOKS_DELIVERY_RETENTION` (30 days by default) it is no
/// longer shown, and the purge deletes it.
#[tokio::test]
async fn history_is_kept_for_the_retention_then_purged() {
    use webhook_core::api::notifications;
    use webhook_core::auth::Caller;
    use webhook_core::ingest::{self, EventEnvelope};
    use webhook_core::retention::purge_once;

    let w = world();
    let sub = subscribe(&w, &refusing_uri(), 90 * 24 * HOUR).await;
    let envelope: EventEnvelope = serde_json::from_value(serde_json::json!({
        "eventId": "evt-1", "type": "contact.created", "organizationId": ORG,
        "departmentId": "d", "contact": {"id": "c-1"}
    }))
    .unwrap();
    let event = envelope.validate(w.clock.now_ms()).unwrap();
    let ingested = ingest::ingest(&w.app, w.db.as_ref(), event).await.unwrap();
    assert_eq!(ingested.notifications, 1);
    let caller = Caller {
        org_id: org(),
        subject: None,
        scopes: vec![],
    };
    let listed = list(&w, &caller, &sub).await;
    assert_eq!(listed.total_elements, 1);
    assert_eq!(listed.content[0].status.as_str(), "PENDING");
    let uuid = listed.content[0].uuid.clone();

    let lease = due(&w).await.pop().expect("the notification is due");
    let verdict = delivery::deliver(&w.app, w.db.as_ref(), w.db.as_ref(), &lease)
        .await
        .unwrap();
    assert!(matches!(verdict, Verdict::Retry { .. }), "{verdict:?}");
    let detail = notifications::get_notification(&w.app, &caller, &sub, &uuid.as_str().into())
        .await
        .unwrap();
    assert_eq!(detail.notification.attempts.len(), 1);
    assert_eq!(
        detail.notification.attempts[0].code.as_deref(),
        Some("CONNECT_FAILED")
    );
    assert_eq!(detail.notification.attempts[0].http_status, None);

    // The schedule runs out within hours: FAILED, no longer queued.
    let mut verdict = verdict;
    while !matches!(verdict, Verdict::Dead(_) | Verdict::Blacklist(_)) {
        w.clock.advance(2 * HOUR);
        let lease = due(&w).await.pop().expect("the retry is due");
        verdict = delivery::deliver(&w.app, w.db.as_ref(), w.db.as_ref(), &lease)
            .await
            .unwrap();
    }
    // 29 days on: still there, and the purge keeps it.
    w.clock.advance(29 * 24 * HOUR);
    assert_eq!(purge_once(&w.app).await.notifications, 0);
    assert_eq!(list(&w, &caller, &sub).await.total_elements, 1);
    // Past 30 days: not shown even before the purge, then deleted.
    w.clock.advance(2 * 24 * HOUR);
    assert_eq!(list(&w, &caller, &sub).await.total_elements, 0);
    let gone = notifications::get_notification(&w.app, &caller, &sub, &uuid.as_str().into()).await;
    assert_eq!(gone.unwrap_err().code, "NOTIFICATION_NOT_FOUND");
    assert_eq!(purge_once(&w.app).await.notifications, 1);
    use webhook_core::history::DeliveryHistory;
    let kept = w.db.get(&org(), &sub, &uuid.as_str().into()).await.unwrap();
    assert_eq!(kept, None, "purged from the file");
}

/// A message is readable by id for `WEBHOOKS_MESSAGE_RETENTION` (30 days
/// by default) from its receipt: past it, `404` before the purge ran, and
/// the purge (the history's, one schedule) deletes its row.
#[tokio::test]
async fn messages_are_kept_for_the_retention_then_purged() {
    use webhook_core::api::messages::get_message;
    use webhook_core::auth::Caller;
    use webhook_core::ingest::{self, EventEnvelope};
    use webhook_core::retention::purge_once;

    let w = world();
    let envelope: EventEnvelope = serde_json::from_value(serde_json::json!({
        "eventId": "evt-m", "type": "message.inbound", "organizationId": ORG,
        "departmentId": "d", "message": {"id": "msg-1", "to": ["+15550100"],
        "from": "+15550199", "text": "personal data"}
    }))
    .unwrap();
    let event = envelope.validate(w.clock.now_ms()).unwrap();
    ingest::ingest(&w.app, w.db.as_ref(), event).await.unwrap();
    let caller = Caller {
        org_id: org(),
        subject: None,
        scopes: vec![],
    };
    let other = Caller {
        org_id: "org-2".into(),
        subject: None,
        scopes: vec![],
    };
    assert_eq!(
        get_message(&w.app, &caller, &"msg-1".into())
            .await
            .unwrap()
            .text,
        "personal data"
    );
    let not_theirs = get_message(&w.app, &other, &"msg-1".into())
        .await
        .unwrap_err();
    assert_eq!(not_theirs.code, "MESSAGE_NOT_FOUND");

    // 29 days on: still there, and the purge keeps it.
    w.clock.advance(29 * 24 * HOUR);
    assert_eq!(purge_once(&w.app).await.messages, 0);
    assert!(get_message(&w.app, &caller, &"msg-1".into()).await.is_ok());
    // Past 30 days: 404 even before the purge, then the row is deleted.
    w.clock.advance(2 * 24 * HOUR);
    let gone = get_message(&w.app, &caller, &"msg-1".into())
        .await
        .unwrap_err();
    assert_eq!(
        (gone.status.as_u16(), gone.code.as_str()),
        (404, "MESSAGE_NOT_FOUND")
    );
    assert_eq!(purge_once(&w.app).await.messages, 1);
    let row = w.db.get_message(&org(), "msg-1", i64::MIN).await.unwrap();
    assert_eq!(row, None, "purged from the file");
}

async fn list(
    w: &World,
    caller: &webhook_core::auth::Caller,
    sub: &SubscriptionId,
) -> webhook_core::model::Page<webhook_core::api::notifications::NotificationView> {
    webhook_core::api::notifications::list_notifications(&w.app, caller, sub, None)
        .await
        .unwrap()
}

/// AWS, as a destination's sender sees it: each send answers the next of
/// `answers` (an outbound port, like the refusing callback above; the
/// pipeline under test is the real one).
struct ScriptedAws {
    answers: std::sync::Mutex<std::collections::VecDeque<Sent>>,
    /// Sends asked for.
    sends: std::sync::atomic::AtomicUsize,
    /// What each validation finds, in turn (then: accepted).
    validations: std::sync::Mutex<std::collections::VecDeque<Refusal>>,
}

impl ScriptedAws {
    fn answering(answers: impl IntoIterator<Item = Sent>) -> Arc<ScriptedAws> {
        Arc::new(ScriptedAws {
            answers: std::sync::Mutex::new(answers.into_iter().collect()),
            sends: Default::default(),
            validations: Default::default(),
        })
    }
}

#[async_trait::async_trait]
impl Destinations for ScriptedAws {
    fn partition_and_region(&self) -> (&str, &str) {
        ("aws", "us-east-1")
    }

    async fn caller_account(&self) -> Result<String, ServiceFault> {
        Ok("123456789012".into())
    }

    async fn validate(
        &self,
        _: &Destination,
        _: &str,
        _: &str,
        _: &str,
        _: &OrgId,
        _: Duration,
    ) -> Result<(), Refusal> {
        match self.validations.lock().unwrap().pop_front() {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }

    async fn send(&self, _: &Destination, _: &str, _: DestinationMessage<'_>, _: Duration) -> Sent {
        self.sends.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let next = self.answers.lock().unwrap().pop_front();
        next.unwrap_or(Sent::Accepted("message-1".into()))
    }
}

/// Throttling and AWS's failures retry on the schedule and count toward the
/// breaker, as a callback's outage does; a send the role may not make
/// disables the subscription at once and keeps the notification as a dead
/// letter (docs/decisions/destinations.md).
#[tokio::test]
async fn a_destinations_failures_retry_count_toward_the_breaker_or_disable() {
    let mut w = world();
    w.app.destinations = Some(ScriptedAws::answering(
        [
            CallFailure::DestinationThrottled,
            CallFailure::DestinationError,
            CallFailure::SendDenied,
        ]
        .map(Sent::Failed),
    ));
    let now = w.clock.now_ms();
    let (sub, _) =
        w.db.upsert_subscription(Upsert {
            org_id: ORG.into(),
            uri: "arn:aws:sqs:us-east-1:222222222222:orders".into(),
            event_filters: vec!["/orgId/org-1/department/d/contact".into()],
            disabled_filters: vec![],
            expires_at: now + 24 * 3_600_000,
            now,
            new_id: uuid::Uuid::now_v7().to_string().into(),
            new_secret: webhook_core::secret::new_signing_secret(),
            max_per_org: 100,
            ordered: None,
            rate_limit: None,
            role_arn: Some("arn:aws:iam::222222222222:role/webhooks".into()),
            external_id: None,
            payload_filter: None,
            retry_schedule: None,
            custom_headers: None,
        })
        .await
        .unwrap();
    for (n, failure) in [
        CallFailure::DestinationThrottled,
        CallFailure::DestinationError,
    ]
    .into_iter()
    .enumerate()
    {
        let verdict = attempt(&w, &sub.id, 1).await;
        assert_eq!(
            verdict,
            match &verdict {
                Verdict::Retry { at, .. } => Verdict::Retry {
                    at: *at,
                    reason: Reason::Failed(failure.into())
                },
                other => panic!("{other:?}"),
            }
        );
        let stored =
            w.db.get_subscription(&org(), &sub.id)
                .await
                .unwrap()
                .unwrap();
        assert_eq!(stored.health.failures, n as u32 + 1, "counted as an outage");
        assert_eq!(stored.status, SubscriptionStatus::Active);
    }
    assert_eq!(
        attempt(&w, &sub.id, 1).await,
        Verdict::Blacklist(Reason::Blacklisted(CallFailure::SendDenied.into()))
    );
    let stored =
        w.db.get_subscription(&org(), &sub.id)
            .await
            .unwrap()
            .unwrap();
    assert_eq!(stored.status, SubscriptionStatus::Blacklisted);
    assert_eq!(
        stored.health.failures, 2,
        "the customer's configuration is no outage"
    );
    assert_eq!(w.db.queue_stats().await.unwrap().dead_letters, 1, "kept");
}

/// A destination subscription as created by a validation with `external_id`.
async fn destination_subscription(w: &World, external_id: &str) -> SubscriptionId {
    let now = w.clock.now_ms();
    let (sub, _) =
        w.db.upsert_subscription(Upsert {
            org_id: ORG.into(),
            uri: "arn:aws:sqs:us-east-1:222222222222:orders".into(),
            event_filters: vec!["/orgId/org-1/department/d/contact".into()],
            disabled_filters: vec![],
            expires_at: now + 30 * 24 * 3_600_000,
            now,
            new_id: uuid::Uuid::now_v7().to_string().into(),
            new_secret: webhook_core::secret::new_signing_secret(),
            max_per_org: 100,
            ordered: None,
            rate_limit: None,
            role_arn: Some("arn:aws:iam::222222222222:role/webhooks".into()),
            external_id: Some(external_id.into()),
            payload_filter: None,
            retry_schedule: None,
            custom_headers: None,
        })
        .await
        .unwrap();
    sub.id
}

/// The service's own fault (its credentials refused by STS, an external-id
/// prefix changed since the validation) is no attempt: the job is deferred,
/// nothing is counted on the subscription (no streak, no breaker, never a
/// blacklist) however often it happens, and once it is fixed the same job
/// is delivered (docs/decisions/destinations.md, "Whose fault, and
/// destinations that cannot be turned on the service").
#[tokio::test]
async fn the_services_own_faults_defer_and_never_count_against_the_subscription() {
    let mut w = world();
    let expired = Sent::ServiceFault(ServiceFault::Credentials("ExpiredToken".into()));
    let aws = ScriptedAws::answering(std::iter::repeat_n(expired, 5));
    w.app.destinations = Some(aws.clone());
    let ours = external_id(&w.app.config.external_id_prefix, &org());
    let sub = destination_subscription(&w, &ours).await;
    // One job, deferred by more faults than the breaker's threshold would
    // take, over longer than the blacklist's streak (a day).
    enqueue(&w, &sub).await;
    for _ in 0..5 {
        let lease = due(&w).await.pop().expect("due");
        assert_eq!(lease.attempt, 1, "a deferral counts no attempt");
        let verdict = delivery::deliver(&w.app, w.db.as_ref(), w.db.as_ref(), &lease)
            .await
            .unwrap();
        let Verdict::Defer { at, reason } = &verdict else {
            panic!("{verdict:?}")
        };
        assert_eq!(
            reason,
            &Reason::ServiceFault(ServiceFault::Credentials("ExpiredToken".into()))
        );
        assert!(*at > w.clock.now_ms(), "deferred, not dropped: {verdict:?}");
        let stored = w.db.get_subscription(&org(), &sub).await.unwrap().unwrap();
        assert_eq!(
            (stored.status, stored.health.failures, stored.failing_since),
            (SubscriptionStatus::Active, 0, None),
            "nothing counted against the subscription"
        );
        w.clock.set(*at);
        w.clock.advance(8 * HOUR);
    }
    // Fixed: the same job delivers.
    let lease = due(&w).await.pop().expect("due");
    let verdict = delivery::deliver(&w.app, w.db.as_ref(), w.db.as_ref(), &lease)
        .await
        .unwrap();
    assert_eq!(verdict, Verdict::Delivered);
    assert_eq!(aws.sends.load(std::sync::atomic::Ordering::SeqCst), 6);

    // Validated with another prefix's id: the service's configuration changed.
    let renamed = destination_subscription(&w, "renamed-stack-id").await;
    let before = aws.sends.load(std::sync::atomic::Ordering::SeqCst);
    let verdict = attempt(&w, &renamed, 1).await;
    assert!(
        matches!(
            &verdict,
            Verdict::Defer {
                reason: Reason::ServiceFault(ServiceFault::ExternalIdChanged),
                ..
            }
        ),
        "{verdict:?}"
    );
    assert_eq!(
        aws.sends.load(std::sync::atomic::Ordering::SeqCst),
        before,
        "the customer's role is not tried with an id it was never given"
    );
    let stored =
        w.db.get_subscription(&org(), &renamed)
            .await
            .unwrap()
            .unwrap();
    assert_eq!(
        (stored.status, stored.health.failures),
        (SubscriptionStatus::Active, 0)
    );
}

/// A destination's create: the customer's configuration is `400` naming the
/// step; what may succeed later (AWS throttled, failed, silent, unreachable)
/// and the service's own fault are `503` with `Retry-After`; a destination
/// in the service's own account is refused before any call.
#[tokio::test]
async fn a_destination_create_answers_400_for_the_customer_and_503_to_try_again() {
    use webhook_core::api::subscriptions::create_subscription;
    use webhook_core::model::{DestinationRequest, SubscriptionRequest};
    let mut w = world();
    let cases = [
        (
            Refusal::Step(CallFailure::RoleNotAssumable),
            400,
            "ROLE_NOT_ASSUMABLE",
        ),
        (
            Refusal::TrustsAnyExternalId,
            400,
            "ROLE_TRUSTS_ANY_EXTERNAL_ID",
        ),
        (
            Refusal::Step(CallFailure::DestinationNotFound),
            400,
            "DESTINATION_NOT_FOUND",
        ),
        (Refusal::Step(CallFailure::SendDenied), 400, "SEND_DENIED"),
        (
            Refusal::Step(CallFailure::DestinationThrottled),
            503,
            "DESTINATION_THROTTLED",
        ),
        (
            Refusal::Step(CallFailure::DestinationError),
            503,
            "DESTINATION_ERROR",
        ),
        (Refusal::Step(CallFailure::Timeout), 503, "TIMEOUT"),
        (
            Refusal::Step(CallFailure::ConnectFailed),
            503,
            "CONNECT_FAILED",
        ),
        (
            Refusal::Service(ServiceFault::Credentials("ExpiredToken".into())),
            503,
            "DESTINATIONS_UNAVAILABLE",
        ),
    ];
    let aws = ScriptedAws::answering([]);
    *aws.validations.lock().unwrap() = cases.iter().map(|(r, _, _)| r.clone()).collect();
    w.app.destinations = Some(aws.clone());
    let caller = webhook_core::auth::Caller::new(ORG, &["webhooks/write"]);
    let request = |account: &str| SubscriptionRequest {
        event_filters: Some(vec!["/orgId/org-1/department/d/contact".into()]),
        destination: Some(DestinationRequest {
            kind: Some("sqs".into()),
            arn: Some(format!("arn:aws:sqs:us-east-1:{account}:orders")),
            role_arn: Some(format!("arn:aws:iam::{account}:role/webhooks")),
        }),
        ..Default::default()
    };
    for (_, status, code) in &cases {
        let e = create_subscription(&w.app, &caller, request("222222222222"))
            .await
            .unwrap_err();
        assert_eq!((e.status.as_u16(), e.code.as_str()), (*status, *code));
        let retry_after = e
            .headers
            .iter()
            .any(|(h, _)| h == http::header::RETRY_AFTER);
        assert_eq!(retry_after, *status == 503, "{code}");
    }
    // The service's own account (ScriptedAws's credentials'): no validation.
    let e = create_subscription(&w.app, &caller, request("123456789012"))
        .await
        .unwrap_err();
    assert_eq!(
        (e.status.as_u16(), e.code.as_str()),
        (400, "DESTINATION_FORBIDDEN")
    );
    let created = create_subscription(&w.app, &caller, request("222222222222"))
        .await
        .unwrap();
    let stored =
        w.db.get_subscription(&org(), &created.id.as_str().into())
            .await
            .unwrap()
            .unwrap();
    assert_eq!(
        stored.external_id,
        Some(external_id(&w.app.config.external_id_prefix, &org())),
        "the external id it was validated with is kept"
    );
}
