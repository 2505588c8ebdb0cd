//! Operational notifications: an organization is told about its own
//! subscriptions (failing, recovered, disabled, a notification exhausted,
//! expiring soon) through subscriptions holding the filter
//! `/orgId/<org>/subscription[?type=...]` ([`crate::filter`]).
//!
//! A notice is ingested like an event: fan-out through the filter index,
//! then one commit through the [`Outbox`], so it is signed, retried, kept in
//! the history and resendable like any notification. Its event id is made
//! of the kind, the subject and the occurrence (a streak's start, an
//! expiry, a notification id), so a notice computed twice (two workers, a
//! redelivered job) is ingested once.
//!
//! No loops, no leaks: a subscription holding an operational filter is never
//! the subject of a notice, and a notice goes only to subscriptions of the
//! subject's organization.

use crate::app::App;
use crate::filter::{self, EventFilter};
pub use crate::filter::{NoticeKind, NoticeKinds};
use crate::history::AttemptRecord;
use crate::ingest::jobs::{commit, job_for};
use crate::notification::{LastAttempt, Notification, SubscriptionInfo};
use crate::queue::{DeliveryJob, Outbox, StoreOrQueueError};
use crate::store::rules::{is_deliverable, visible_status};
use crate::store::StoredSubscription;

/// Whether `subscription` holds an operational filter: it is then never the
/// subject of a notice (a failing operational subscription shows in its
/// own history and the console only).
pub fn is_operational(subscription: &StoredSubscription) -> bool {
    subscription.event_filters.iter().any(|f| {
        EventFilter::parse(f).is_ok_and(|p| matches!(p.topic, filter::Topic::Subscription(_)))
    })
}

/// One piece of news about a subscription.
#[derive(Debug, Clone)]
pub struct Notice<'a> {
    /// What happened: failing, recovered, disabled, exhausted or expiring.
    pub kind: NoticeKind,
    /// The subscription it is about, as last read.
    pub subject: &'a StoredSubscription,
    /// What makes this notice distinct from earlier ones of its kind about
    /// the subject (a streak's start, an expiry, a notification id).
    pub occurrence: String,
    /// The subject's consecutive failed attempts, for failing, disabled and exhausted notices.
    pub consecutive_failures: Option<u32>,
    /// The notification that ran out of retries, for an exhausted notice.
    pub notification_id: Option<String>,
    /// The attempt that caused the notice, when one did.
    pub last_attempt: Option<&'a AttemptRecord>,
}

impl<'a> Notice<'a> {
    /// A notice of `kind` about `subject`, named by `occurrence`, with no details yet.
    pub fn new(kind: NoticeKind, subject: &'a StoredSubscription, occurrence: String) -> Self {
        Notice {
            kind,
            subject,
            occurrence,
            consecutive_failures: None,
            notification_id: None,
            last_attempt: None,
        }
    }

    /// The id of the event this notice is ingested as.
    pub fn event_id(&self) -> String {
        format!(
            "notice/{}/{}/{}",
            self.kind.as_str(),
            self.subject.id,
            self.occurrence
        )
    }

    fn info(&self, now: i64) -> SubscriptionInfo {
        let s = self.subject;
        SubscriptionInfo {
            organization_id: s.org_id.to_string(),
            subscription_id: s.id.to_string(),
            uri: s.uri.clone(),
            kind: self.kind.event_type().to_owned(),
            status: visible_status(s, now).as_str().to_owned(),
            expiration_time: crate::clock::iso_millis(s.expires_at),
            consecutive_failures: self.consecutive_failures,
            notification_id: self.notification_id.clone(),
            last_attempt: self.last_attempt.map(|a| LastAttempt {
                timestamp: a.at,
                http_status: a.http_status,
                code: a.code.clone(),
                duration_ms: a.duration_ms,
            }),
        }
    }
}

/// Ingests `notice` for the subject's organization: one notification per
/// deliverable subscription of that organization whose operational filter asks
/// for its kind. Returns how many were queued (0 for a repeat).
pub async fn publish(
    app: &App,
    outbox: &dyn Outbox,
    notice: &Notice<'_>,
) -> Result<usize, StoreOrQueueError> {
    let subject = notice.subject;
    if is_operational(subject) {
        return Ok(0);
    }
    let org = subject.org_id.as_str();
    let key = EventFilter::operational(org, NoticeKinds::ALL).to_string();
    let now = app.now_ms();
    let receivers = app.store.subscriptions_for_filter(&key).await?;
    let event_id = notice.event_id();
    let info = notice.info(now);
    let jobs: Vec<DeliveryJob> = receivers
        .iter()
        .filter(|r| r.org_id == subject.org_id && r.id != subject.id)
        .filter(|r| is_deliverable(r, now))
        .filter_map(|r| {
            let matching = r.event_filters.iter().find(|f| {
                EventFilter::parse(f)
                    .is_ok_and(|p| p.organization_id == org && p.wants_notice(notice.kind))
            })?;
            Some(job_for(&event_id, r, now, false, |uuid| Notification {
                uuid: uuid.to_owned(),
                timestamp: now,
                event: matching.clone(),
                subscription_id: r.id.to_string(),
                message_info: None,
                contact_info: None,
                subscription_info: Some(info.clone()),
            }))
        })
        .collect();
    if jobs.is_empty() {
        return Ok(0);
    }
    let count = jobs.len();
    let new = commit(app, outbox, &subject.org_id, &event_id, None, jobs).await?;
    tracing::info!(org_id = %org, subscription_id = %subject.id, kind = notice.kind.as_str(),
        notifications = count, duplicate = !new, "operational notification");
    Ok(if new { count } else { 0 })
}

/// [`publish`], logging instead of failing: a notice must never fail the
/// delivery that caused it.
pub async fn tell(app: &App, outbox: &dyn Outbox, notice: Notice<'_>) {
    if let Err(e) = publish(app, outbox, &notice).await {
        if let StoreOrQueueError::Store(e) = &e {
            crate::telemetry::metrics::store_error(e.kind());
        }
        tracing::warn!(subscription_id = %notice.subject.id, kind = notice.kind.as_str(), part = e.part(), error = %e,
            "cannot queue an operational notification");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_have_names_and_types() {
        for kind in NoticeKind::ALL {
            assert_eq!(NoticeKind::parse(kind.as_str()), Some(kind));
            assert!(kind.event_type().ends_with(kind.as_str()));
        }
        assert_eq!(NoticeKind::parse("FAILING"), Some(NoticeKind::Failing));
        assert_eq!(NoticeKind::parse("late"), None);
        let set = NoticeKinds::NONE
            .with(NoticeKind::Expiring)
            .with(NoticeKind::Failing);
        assert_eq!(set.to_string(), "failing,expiring");
        assert!(set.contains(NoticeKind::Failing) && !set.contains(NoticeKind::Recovered));
    }
}
