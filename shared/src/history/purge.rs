//! Retention: history older than `WEBHOOKS_DELIVERY_RETENTION` is deleted
//! by a periodic purge where the store needs one (SQLite); DynamoDB's TTL
//! does it by itself, and the handlers never show history past the
//! retention either way.

use std::sync::Arc;
use std::time::Duration;

use crate::app::App;
use crate::clock::millis;

/// How often the purge runs.
pub const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// Purges now, then every [`PURGE_EVERY`], until `shutdown` resolves.
pub async fn run_purges(app: Arc<App>, shutdown: impl std::future::Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        purge_once(&app).await;
        tokio::select! {
            _ = tokio::time::sleep(PURGE_EVERY) => {}
            _ = &mut shutdown => return,
        }
    }
}

/// Deletes the history created before the retention; returns how much.
pub async fn purge_once(app: &App) -> u64 {
    let before = app.now_ms() - millis(app.config.delivery_retention);
    match app.history.purge(before).await {
        Ok(0) => 0,
        Ok(n) => {
            tracing::info!(
                notifications = n,
                "delivery history past its retention purged"
            );
            n
        }
        Err(e) => {
            tracing::warn!(error = %e, "the delivery history could not be purged");
            0
        }
    }
}
