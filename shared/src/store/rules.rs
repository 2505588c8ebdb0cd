//! The business rules of a stored subscription, computed here and only
//! here: every adapter stores what these answer and loads what it stored,
//! none re-states them in its own language (SQL, DynamoDB expressions).
//!
//! - [`visible_status`]: the status a client sees at `now`.
//! - [`is_deliverable`]: whether notifications go to it at `now`: asked
//!   by ingestion's fan-out, operational notices and reminders, the
//!   delivery pipeline, and resend and recover, and answered only here.
//! - [`after_delivery`]: the failure streak and the blacklist after a
//!   delivery attempt.

use super::{DeliveryRecord, StoredSubscription};
use crate::model::SubscriptionStatus;

/// The status the client sees at `now`: an active subscription past its
/// expiry is `EXPIRED`.
pub fn visible_status(s: &StoredSubscription, now: i64) -> SubscriptionStatus {
    status_at(s.status, s.expires_at, now)
}

/// Whether notifications go to `s` at `now`: it is active and has not
/// expired (its [`visible_status`] is `ACTIVE`).
pub fn is_deliverable(s: &StoredSubscription, now: i64) -> bool {
    visible_status(s, now) == SubscriptionStatus::Active
}

/// [`visible_status`] from the two stored values it depends on.
pub fn status_at(stored: SubscriptionStatus, expires_at: i64, now: i64) -> SubscriptionStatus {
    match stored {
        SubscriptionStatus::Active if expires_at <= now => SubscriptionStatus::Expired,
        other => other,
    }
}

/// The stored status and failure streak start after `record`, from the
/// current ones: a success ends the streak; a failure starts it, or
/// blacklists an active subscription whose streak is at least
/// `blacklist_after_ms` old; `410 Gone` blacklists at once.
pub fn after_delivery(
    status: SubscriptionStatus,
    failing_since: Option<i64>,
    record: DeliveryRecord,
) -> (SubscriptionStatus, Option<i64>) {
    match record {
        DeliveryRecord::Succeeded => (status, None),
        DeliveryRecord::Failed {
            now,
            blacklist_after_ms,
        } => match failing_since {
            Some(since)
                if status == SubscriptionStatus::Active
                    && now.saturating_sub(since) >= blacklist_after_ms =>
            {
                (SubscriptionStatus::Blacklisted, Some(since))
            }
            Some(since) => (status, Some(since)),
            None => (status, Some(now)),
        },
        DeliveryRecord::Gone => (SubscriptionStatus::Blacklisted, failing_since),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use SubscriptionStatus::{Active, Blacklisted, Expired};

    fn failed(now: i64) -> DeliveryRecord {
        DeliveryRecord::Failed {
            now,
            blacklist_after_ms: 10,
        }
    }

    #[test]
    fn an_active_subscription_past_its_expiry_shows_expired() {
        assert_eq!(status_at(Active, 5, 4), Active);
        assert_eq!(status_at(Active, 5, 5), Expired);
        assert_eq!(status_at(Blacklisted, 5, 9), Blacklisted);
    }

    #[test]
    fn a_streak_blacklists_once_old_enough() {
        assert_eq!(
            after_delivery(Active, None, failed(100)),
            (Active, Some(100))
        );
        assert_eq!(
            after_delivery(Active, Some(100), failed(109)),
            (Active, Some(100))
        );
        assert_eq!(
            after_delivery(Active, Some(100), failed(110)),
            (Blacklisted, Some(100))
        );
        // Only an active subscription is blacklisted by a streak.
        assert_eq!(
            after_delivery(Expired, Some(100), failed(200)),
            (Expired, Some(100))
        );
        assert_eq!(
            after_delivery(Active, Some(100), DeliveryRecord::Succeeded),
            (Active, None)
        );
        assert_eq!(
            after_delivery(Active, None, DeliveryRecord::Gone),
            (Blacklisted, None)
        );
    }
}
