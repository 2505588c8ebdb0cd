//! Handlers of a subscription's delivery history: its notifications (a page,
//! or one with its attempts), resend, recover and stats. Every call first
//! finds the subscription in the caller's organization (another
//! organization's is 404), and reads history no older than the retention.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::problem::{queue_problem, store_problem};
use super::subscriptions::find;
use crate::app::App;
use crate::auth::Caller;
use crate::clock::{iso_millis, millis};
use crate::error::{ApiError, ErrorCode, FieldError};
use crate::history::stats::{self, Stats};
use crate::history::{
    AttemptRecord, Claim, NotificationDetail, NotificationStatus, NotificationSummary, Trigger,
    Window, SORTABLE,
};
use crate::ids::{NotificationId, SubscriptionId};
use crate::model::Page;
use crate::page::PageRequest;
use crate::queue::{DeliveryJob, DeliveryQueue};
use crate::store::rules::{is_deliverable, visible_status};
use crate::store::StoredSubscription;

/// At most this many notifications are sent again by one recover call.
pub const MAX_RECOVER: usize = 10_000;
/// Times are ISO 8601 with a 4-digit year: epoch ms up to the end of 9999.
pub const MAX_EPOCH_MS: i64 = 253_402_300_799_999;
/// The stats window is at most this long.
pub const MAX_STATS_WINDOW_MS: i64 = 31 * 24 * 3_600_000;
const DAY_MS: i64 = 24 * 3_600_000;

/// A notification as listed (`A` = the attempt count), or in detail (`A` =
/// its attempts: the detail's `attempts` is the list, not the count).
#[derive(Debug, Serialize)]
pub struct NotificationView<A = u32> {
    /// `uuid`: the notification's id, also its payload's and its `webhook-id` header's.
    pub uuid: String,
    /// `eventId`: the id of the event it notifies.
    #[serde(rename = "eventId")]
    pub event_id: String,
    /// `event`: the filter the event matched, e.g. `/orgId/o/department/d/contact`.
    pub event: String,
    /// `subscriptionId`: the subscription it goes to.
    #[serde(rename = "subscriptionId")]
    pub subscription_id: String,
    /// `createdDateTime`: when the event was ingested, ISO 8601 UTC with milliseconds.
    #[serde(rename = "createdDateTime")]
    pub created_date_time: String,
    /// `status`: `PENDING`, `DELIVERED` or `FAILED`.
    pub status: NotificationStatus,
    /// `attempts`: how many were made (a list) or the attempts themselves (the detail).
    pub attempts: A,
    /// `lastAttemptTime`: when the latest attempt started; `null` before the first.
    #[serde(rename = "lastAttemptTime")]
    pub last_attempt_time: Option<String>,
    /// `nextAttemptTime`: when the next retry is due (`PENDING` only); otherwise `null`.
    #[serde(rename = "nextAttemptTime")]
    pub next_attempt_time: Option<String>,
    /// `lastHttpStatus`: the callback's status for the latest attempt; `null` when nothing answered.
    #[serde(rename = "lastHttpStatus")]
    pub last_http_status: Option<u16>,
    /// `lastCode`: why the latest attempt failed, or why it ended unsent; `null` after a success.
    #[serde(rename = "lastCode")]
    pub last_code: Option<String>,
}

/// A notification with its attempts and payload.
#[derive(Debug, Serialize)]
pub struct NotificationDetailView {
    /// The fields of the summary, with the attempts listed.
    #[serde(flatten)]
    pub notification: NotificationView<Vec<AttemptView>>,
    /// The exact JSON body that was sent.
    pub payload: Box<RawValue>,
    /// The W3C trace id of the ingestion that created it (None before traces were kept).
    #[serde(rename = "traceId", skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

/// One delivery attempt, as the detail lists it (the `Attempt` schema).
#[derive(Debug, Serialize)]
pub struct AttemptView {
    /// `attempt`: 1 for the first, then 2, 3, ...
    pub attempt: u32,
    /// `timestamp`: when it started, ISO 8601 UTC with milliseconds.
    pub timestamp: String,
    /// `durationMs`: how long the POST took, in milliseconds.
    #[serde(rename = "durationMs")]
    pub duration_ms: u64,
    /// `outcome`: `SUCCEEDED` (a 2xx) or `FAILED`.
    pub outcome: &'static str,
    /// `httpStatus`: the callback's status; `null` when nothing answered.
    #[serde(rename = "httpStatus")]
    pub http_status: Option<u16>,
    /// `code`: the failing step (`TIMEOUT`, `BAD_STATUS`, ...); `null` on success.
    pub code: Option<String>,
    /// `responseBody`: the first 4 KiB of the answer, as text; empty when nothing answered.
    #[serde(rename = "responseBody")]
    pub response_body: String,
    /// `trigger`: `SCHEDULED` (first attempt and retries) or `MANUAL` (after a resend or recover).
    pub trigger: Trigger,
}

/// Answer of a resend.
#[derive(Debug, Serialize)]
pub struct Resent {
    /// `uuid`: the notification sent again.
    pub uuid: String,
    /// `status`: always `PENDING`.
    pub status: NotificationStatus,
}

/// Body of a recover: an object (a JSON array is refused, though serde
/// would read one into the struct).
#[derive(Debug, Deserialize)]
#[serde(try_from = "serde_json::Map<String, serde_json::Value>")]
pub struct RecoverRequest {
    /// `since`: start of the window (epoch ms, inclusive); required.
    pub since: Option<i64>,
    /// `until`: end of the window (epoch ms, exclusive); absent: now.
    pub until: Option<i64>,
}

#[derive(Deserialize)]
struct RecoverFields {
    #[serde(default, deserialize_with = "crate::model::epoch_millis")]
    since: Option<i64>,
    #[serde(default, deserialize_with = "crate::model::epoch_millis")]
    until: Option<i64>,
}

impl TryFrom<serde_json::Map<String, serde_json::Value>> for RecoverRequest {
    type Error = serde_json::Error;

    fn try_from(object: serde_json::Map<String, serde_json::Value>) -> Result<Self, Self::Error> {
        let fields: RecoverFields = serde_json::from_value(serde_json::Value::Object(object))?;
        Ok(RecoverRequest {
            since: fields.since,
            until: fields.until,
        })
    }
}

/// Answer of a recover.
#[derive(Debug, Serialize)]
pub struct Recovered {
    /// How many FAILED notifications are sent again.
    pub notifications: usize,
    /// More FAILED notifications are in the window: call again.
    pub more: bool,
}

fn view<A>(s: &NotificationSummary, attempts: A) -> NotificationView<A> {
    NotificationView {
        uuid: s.id.to_string(),
        event_id: s.event_id.clone(),
        event: s.event.clone(),
        subscription_id: s.subscription_id.to_string(),
        created_date_time: iso_millis(s.created_at),
        status: s.status,
        attempts,
        last_attempt_time: s.last_attempt_at.map(iso_millis),
        next_attempt_time: s.next_attempt_at.map(iso_millis),
        last_http_status: s.last_http_status,
        last_code: s.last_code.clone(),
    }
}

fn attempt_view(n: usize, a: &AttemptRecord) -> AttemptView {
    AttemptView {
        attempt: u32::try_from(n + 1).unwrap_or(u32::MAX),
        timestamp: iso_millis(a.at),
        duration_ms: a.duration_ms,
        outcome: if a.succeeded() { "SUCCEEDED" } else { "FAILED" },
        http_status: a.http_status,
        code: a.code.clone(),
        response_body: a.response_body.clone(),
        trigger: a.trigger,
    }
}

/// The oldest creation time still kept.
fn retained_since(app: &App) -> i64 {
    app.now_ms() - millis(app.config.delivery_retention)
}

/// `GET /webhooksubscription/{id}/notifications?page&size&sort&status&since&until`.
pub async fn list_notifications(
    app: &App,
    caller: &Caller,
    id: &SubscriptionId,
    query: Option<&str>,
) -> Result<Page<NotificationView>, ApiError> {
    let page = PageRequest::from_query(query, SORTABLE)?;
    let filters = ListQuery::parse(query)?;
    let subscription = find(app, caller, id).await?;
    let window = Window {
        statuses: filters.statuses,
        since: filters.since.unwrap_or(0).max(retained_since(app)),
        until: filters.until.unwrap_or(i64::MAX),
    };
    let page = app
        .history
        .list(&caller.org_id, &subscription.id, &window, &page)
        .await
        .map_err(store_problem)?;
    Ok(page.map_content(|s| view(&s, s.attempts)))
}

/// `GET /webhooksubscription/{id}/notifications/{uuid}`.
pub async fn get_notification(
    app: &App,
    caller: &Caller,
    id: &SubscriptionId,
    uuid: &NotificationId,
) -> Result<NotificationDetailView, ApiError> {
    let subscription = find(app, caller, id).await?;
    let detail = notification(app, &subscription, uuid).await?;
    let payload = RawValue::from_string(detail.payload.clone())
        .or_else(|_| serde_json::value::to_raw_value(&detail.payload))
        .map_err(|_| ApiError::internal())?;
    let attempts = detail
        .attempts
        .iter()
        .enumerate()
        .map(|(n, a)| attempt_view(n, a))
        .collect();
    Ok(NotificationDetailView {
        notification: view(&detail.summary, attempts),
        payload,
        trace_id: detail.trace_id,
    })
}

/// `POST /webhooksubscription/{id}/notifications/{uuid}/resend`: enqueued
/// due now (a PENDING one is sent now instead of at its scheduled time).
pub async fn resend_notification(
    app: &App,
    queue: &dyn DeliveryQueue,
    caller: &Caller,
    id: &SubscriptionId,
    uuid: &NotificationId,
) -> Result<Resent, ApiError> {
    let subscription = active(app, caller, id).await?;
    let detail = notification(app, &subscription, uuid).await?;
    let claim = Claim {
        job: DeliveryJob {
            id: detail.summary.id.clone(),
            org_id: caller.org_id.clone(),
            subscription_id: subscription.id.clone(),
            body: detail.payload,
            created_at: detail.summary.created_at,
            trigger: Trigger::Manual,
            attempts: 0,
            not_before: None,
            traceparent: None,
            ordered: subscription.ordered,
            history_attempts: detail.summary.attempts,
        },
        status: detail.summary.status,
        attempts: detail.summary.attempts,
    };
    send_again(app, queue, std::slice::from_ref(&claim)).await?;
    tracing::info!(org_id = %caller.org_id, subscription_id = %subscription.id, notification = %claim.job.id, "notification resent");
    Ok(Resent {
        uuid: claim.job.id.to_string(),
        status: NotificationStatus::Pending,
    })
}

/// `POST /webhooksubscription/{id}/recover`: every FAILED notification
/// created in the window is sent again, up to [`MAX_RECOVER`] per call.
pub async fn recover_notifications(
    app: &App,
    queue: &dyn DeliveryQueue,
    caller: &Caller,
    id: &SubscriptionId,
    request: RecoverRequest,
) -> Result<Recovered, ApiError> {
    let now = app.now_ms();
    let Some(since) = request.since else {
        return Err(ApiError::field("since", "is required (epoch milliseconds)"));
    };
    let until = request.until.unwrap_or(now);
    for (field, ms) in [("since", since), ("until", until)] {
        if !(0..=MAX_EPOCH_MS).contains(&ms) {
            return Err(ApiError::field(
                field,
                format!("must be epoch milliseconds from 0 to {MAX_EPOCH_MS}"),
            ));
        }
    }
    if until <= since {
        return Err(ApiError::field("until", "must be after since"));
    }
    if since < retained_since(app) {
        return Err(ApiError::field(
            "since",
            format!(
                "reaches back past the delivery history's retention: the oldest kept is from {}",
                iso_millis(retained_since(app))
            ),
        ));
    }
    let subscription = active(app, caller, id).await?;
    let window = Window {
        statuses: vec![NotificationStatus::Failed],
        since,
        until,
    };
    let mut claims = app
        .history
        .claims(&caller.org_id, &subscription.id, &window, MAX_RECOVER + 1)
        .await
        .map_err(store_problem)?;
    let more = claims.len() > MAX_RECOVER;
    claims.truncate(MAX_RECOVER);
    for claim in &mut claims {
        // An ordered subscription's recover takes its place in the line;
        // its attempts are numbered from those the history counts now.
        claim.job.ordered = subscription.ordered;
        claim.job.history_attempts = claim.attempts;
    }
    send_again(app, queue, &claims).await?;
    tracing::info!(org_id = %caller.org_id, subscription_id = %subscription.id, notifications = claims.len(), more, "failed notifications recovered");
    Ok(Recovered {
        notifications: claims.len(),
        more,
    })
}

/// `GET /webhooksubscription/{id}/stats?since&until` (default: the last 24 hours).
pub async fn delivery_stats(
    app: &App,
    caller: &Caller,
    id: &SubscriptionId,
    query: Option<&str>,
) -> Result<Stats, ApiError> {
    let q = ListQuery::parse(query)?;
    let until = q.until.unwrap_or_else(|| app.now_ms());
    let since = q.since.unwrap_or(until - DAY_MS);
    if until <= since {
        return Err(ApiError::field("until", "must be after since"));
    }
    if until - since > MAX_STATS_WINDOW_MS {
        return Err(ApiError::field("since", "the window is at most 31 days"));
    }
    let subscription = find(app, caller, id).await?;
    let since = since.max(retained_since(app));
    let rows = app
        .history
        .stats_rows(&caller.org_id, &subscription.id, since, until.max(since))
        .await
        .map_err(store_problem)?;
    Ok(stats::compute(&rows, since, until.max(since)))
}

/// Enqueues the claims, then marks them PENDING (in that order: a crash
/// between the two leaves a notification sent and recorded, never one
/// marked PENDING that no job will send).
async fn send_again(
    app: &App,
    queue: &dyn DeliveryQueue,
    claims: &[Claim],
) -> Result<(), ApiError> {
    if claims.is_empty() {
        return Ok(());
    }
    let jobs = claims.iter().map(|c| c.job.clone()).collect();
    queue.enqueue(jobs).await.map_err(queue_problem)?;
    app.delivery_wake.notify_one();
    app.history
        .mark_pending(claims, app.now_ms())
        .await
        .map_err(store_problem)?;
    Ok(())
}

/// The caller's subscription, which must be deliverable to send to.
async fn active(
    app: &App,
    caller: &Caller,
    id: &SubscriptionId,
) -> Result<StoredSubscription, ApiError> {
    let subscription = find(app, caller, id).await?;
    let now = app.now_ms();
    if !is_deliverable(&subscription, now) {
        let status = visible_status(&subscription, now);
        return Err(ApiError::new(
            http::StatusCode::CONFLICT,
            ErrorCode::SubscriptionNotActive,
            format!(
                "the subscription is {}: post its uri again to reactivate it",
                status.as_str()
            ),
        ));
    }
    Ok(subscription)
}

/// One notification of the subscription, within the retention.
async fn notification(
    app: &App,
    subscription: &StoredSubscription,
    uuid: &NotificationId,
) -> Result<NotificationDetail, ApiError> {
    app.history
        .get(&subscription.org_id, &subscription.id, uuid)
        .await
        .map_err(store_problem)?
        .filter(|d| d.summary.created_at >= retained_since(app))
        .ok_or_else(|| notification_not_found(uuid.as_str()))
}

fn notification_not_found(uuid: &str) -> ApiError {
    let shown: String = uuid.chars().take(100).collect();
    ApiError::not_found(
        ErrorCode::NotificationNotFound,
        format!("no notification '{shown}' of this subscription"),
    )
}

/// The filters of a list or stats query: `status` (repeatable, or
/// comma-separated), `since` and `until` (epoch milliseconds).
#[derive(Debug, Default)]
struct ListQuery {
    statuses: Vec<NotificationStatus>,
    since: Option<i64>,
    until: Option<i64>,
}

impl ListQuery {
    fn parse(query: Option<&str>) -> Result<Self, ApiError> {
        let mut q = ListQuery::default();
        let mut errors = Vec::new();
        for (key, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            let value = value.trim();
            match key.as_ref() {
                "status" => {
                    for s in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                        match NotificationStatus::parse(s) {
                            Some(status) if !q.statuses.contains(&status) => {
                                q.statuses.push(status)
                            }
                            Some(_) => {}
                            None => errors.push(FieldError::new(
                                "status",
                                format!("'{}' is not PENDING, DELIVERED or FAILED", short(s)),
                            )),
                        }
                    }
                }
                "since" | "until" if !value.is_empty() => match value.parse::<i64>() {
                    Ok(ms) if (0..=MAX_EPOCH_MS).contains(&ms) => {
                        if key == "since" {
                            q.since = Some(ms)
                        } else {
                            q.until = Some(ms)
                        }
                    }
                    _ => errors.push(FieldError::new(
                        if key == "since" { "since" } else { "until" },
                        format!(
                            "must be epoch milliseconds from 0 to {MAX_EPOCH_MS}, got '{}'",
                            short(value)
                        ),
                    )),
                },
                _ => {}
            }
        }
        let mut reported = std::collections::HashSet::new();
        errors.retain(|e| reported.insert(e.field.clone()));
        if errors.is_empty() {
            Ok(q)
        } else {
            Err(ApiError::validation(errors))
        }
    }
}

fn short(s: &str) -> String {
    s.chars().take(40).collect()
}
