//! Step 9 of [`deliver`](super::deliver): what an attempt tells the
//! subscription's organization ([`crate::notice`]). The health write is
//! compare-and-set, so of concurrent attempts only the one whose write made
//! the subscription failing (or ended that) tells it; the notices' event
//! ids make a repeat (a redelivered job) a no-op.

use super::{AfterFailure, Attempt, Verdict};
use crate::app::App;
use crate::health::Health;
use crate::history::AttemptRecord;
use crate::model::SubscriptionStatus;
use crate::notice::{self, Notice, NoticeKind};
use crate::queue::{DeliveryJob, Outbox};
use crate::store::StoredSubscription;

/// What an attempt that was sent leaves to tell.
pub(super) struct Told {
    /// The subscription as read before the attempt.
    pub subject: StoredSubscription,
    /// The health change the attempt wrote, `(before, after)`.
    pub health: Option<(Health, Health)>,
    /// The record of the POST, the notices' `lastAttempt`.
    pub made: Option<AttemptRecord>,
}

impl Told {
    /// Publishes each notice the attempt and its verdict call for (never failing the delivery).
    pub async fn tell(
        self,
        app: &App,
        outbox: &dyn Outbox,
        job: &DeliveryJob,
        attempt: &Attempt,
        verdict: &Verdict,
    ) {
        if notice::is_operational(&self.subject) {
            return; // told nowhere but its own history
        }
        let made = self.made.as_ref();
        let streak = self.health.as_ref().map(|(_, after)| after.streak.failures);
        if let Some((before, after)) = &self.health {
            match after.failing_change(before) {
                Some(true) => {
                    let since = after.streak.since.unwrap_or_default();
                    let mut n = Notice::new(NoticeKind::Failing, &self.subject, since.to_string());
                    n.consecutive_failures = Some(after.streak.failures);
                    n.last_attempt = made;
                    notice::tell(app, outbox, n).await;
                }
                Some(false) => {
                    let since = before.streak.since.unwrap_or_default();
                    let mut n =
                        Notice::new(NoticeKind::Recovered, &self.subject, since.to_string());
                    n.consecutive_failures = Some(before.streak.failures);
                    n.last_attempt = made;
                    notice::tell(app, outbox, n).await;
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
            let subject = StoredSubscription {
                status: SubscriptionStatus::Blacklisted,
                ..self.subject.clone()
            };
            let occurrence = self.subject.updated_at.to_string();
            let mut n = Notice::new(NoticeKind::Disabled, &subject, occurrence);
            n.consecutive_failures = streak;
            n.last_attempt = made;
            notice::tell(app, outbox, n).await;
        }
        if matches!(verdict, Verdict::Dead(_) | Verdict::Blacklist(_)) {
            let mut n = Notice::new(NoticeKind::Exhausted, &self.subject, job.id.to_string());
            n.notification_id = Some(job.id.to_string());
            n.consecutive_failures = streak;
            n.last_attempt = made;
            notice::tell(app, outbox, n).await;
        }
    }
}
