//! Expiry reminders: a subscription's organization is told once,
//! `WEBHOOKS_EXPIRY_NOTICE` before it expires (`subscription.expiring`,
//! [`crate::notice`]). The store finds them through an index of expiry
//! times ([`Store::expiring_subscriptions`](crate::store::Store::expiring_subscriptions)),
//! never a scan; a reminder is marked sent after its notice is queued, so a
//! run that stops halfway is completed by the next one (the notice's event
//! id makes the repeat a no-op). Re-posting a subscription sets a new expiry,
//! which re-arms it. `webhooks-local` runs [`run_reminders`]; on AWS a
//! scheduled function (`remind-expiring`) runs [`remind_expiring`] every minute.

use std::sync::Arc;

use crate::app::App;
use crate::clock::millis;
use crate::notice::{self, Notice, NoticeKind};
use crate::queue::{Outbox, StoreOrQueueError};
use crate::store::rules::is_deliverable;

/// Subscriptions read per store call.
const BATCH: usize = 100;
/// Batches per run at most: the rest waits for the next run.
const MAX_BATCHES: usize = 50;

/// Tells the organizations of the subscriptions expiring within the notice
/// and not yet reminded; returns how many were reminded.
pub async fn remind_expiring(app: &App, outbox: &dyn Outbox) -> Result<usize, StoreOrQueueError> {
    let now = app.now_ms();
    let until = now.saturating_add(millis(app.config.expiry_notice));
    let mut reminded = 0;
    for _ in 0..MAX_BATCHES {
        let due = app.store.expiring_subscriptions(now, until, BATCH).await?;
        for subject in &due {
            // Only an active subscription is worth renewing, and an
            // operational one is never a notice's subject; the others are
            // marked too, so they are not looked at again.
            let active = is_deliverable(subject, now);
            if active && !notice::is_operational(subject) {
                let notice = Notice::new(
                    NoticeKind::Expiring,
                    subject,
                    subject.expires_at.to_string(),
                );
                notice::publish(app, outbox, &notice).await?;
                reminded += 1;
            }
            app.store
                .mark_expiry_reminded(&subject.org_id, &subject.id, subject.expires_at)
                .await?;
        }
        if due.len() < BATCH {
            break;
        }
    }
    Ok(reminded)
}

/// Runs [`remind_expiring`] now, then every `WEBHOOKS_EXPIRY_CHECK_INTERVAL`,
/// until `shutdown` resolves; a failed run is logged (the next one retries).
pub async fn run_reminders(
    app: Arc<App>,
    outbox: Arc<dyn Outbox>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        match remind_expiring(&app, outbox.as_ref()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(reminded = n, "expiry reminders queued"),
            Err(e) => {
                tracing::warn!(part = e.part(), error = %e, "expiry reminders failed; the next run retries")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(app.config.expiry_check_interval) => {}
            _ = &mut shutdown => return,
        }
    }
}
