//! Step 9 of [`deliver`](super): what an attempt tells the
//! subscription's organization ([`crate::notice`]). The health write is
//! compare-and-set, so of concurrent attempts only the one whose write made
//! the subscription failing (or ended that) tells it; the notices' event
//! ids make a repeat (a redelivered job) a no-op.

use super::found::{AfterFailure, Attempt, Attempted, Verdict};
use super::run::Run;
use crate::model::SubscriptionStatus;
use crate::notice::{self, Notice, NoticeKind};
use crate::queue::Outbox;
use crate::store::StoredSubscription;

/// Step 9: publishes each notice a sent attempt and its verdict call for
/// (never failing the delivery). Nothing for an attempt not sent.
pub async fn tell(run: &Run<'_>, outbox: &dyn Outbox, attempted: &Attempted, verdict: &Verdict) {
    let Some((subject, health)) = &attempted.sent else {
        return;
    };
    let (app, job, attempt) = (run.app, run.job(), &attempted.attempt);
    if notice::is_operational(subject) {
        return; // told nowhere but its own history
    }
    let made = attempted.made.as_ref();
    let blacklisted;
    let mut notices = Vec::new();
    let streak = health.as_ref().map(|(_, after)| after.streak.failures);
    if let Some((before, after)) = health {
        match after.failing_change(before) {
            Some(true) => {
                let since = after.streak.since.unwrap_or_default();
                let mut n = Notice::new(NoticeKind::Failing, subject, since.to_string());
                n.consecutive_failures = Some(after.streak.failures);
                n.last_attempt = made;
                notices.push(n);
            }
            Some(false) => {
                let since = before.streak.since.unwrap_or_default();
                let mut n = Notice::new(NoticeKind::Recovered, subject, since.to_string());
                n.consecutive_failures = Some(before.streak.failures);
                n.last_attempt = made;
                notices.push(n);
            }
            None => {}
        }
    }
    let disabled = matches!(
        attempt,
        Attempt::Gone
            | Attempt::Failed {
                subscription: AfterFailure::Blacklisted,
                ..
            }
    );
    if disabled {
        // Named by the version that was disabled: a re-post (a new
        // `updated_at`) that is disabled again is told again.
        blacklisted = StoredSubscription {
            status: SubscriptionStatus::Blacklisted,
            ..subject.clone()
        };
        let occurrence = subject.updated_at.to_string();
        let mut n = Notice::new(NoticeKind::Disabled, &blacklisted, occurrence);
        n.consecutive_failures = streak;
        n.last_attempt = made;
        notices.push(n);
    }
    if matches!(verdict, Verdict::Dead(_) | Verdict::Blacklist(_)) {
        let mut n = Notice::new(NoticeKind::Exhausted, subject, job.id.to_string());
        n.notification_id = Some(job.id.to_string());
        n.consecutive_failures = streak;
        n.last_attempt = made;
        notices.push(n);
    }
    for n in notices {
        notice::tell(app, outbox, n).await;
    }
}
