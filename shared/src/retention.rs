//! Retention: delivery history older than `WEBHOOKS_DELIVERY_RETENTION` and
//! messages older than `WEBHOOKS_MESSAGE_RETENTION` are deleted by one
//! periodic purge where the store needs one (SQLite); DynamoDB's TTL does it
//! by itself. Either way the handlers never show what is past its retention:
//! history windows are clamped to it, and a message read by id is asked for
//! with [`messages_since`].

use std::sync::Arc;
use std::time::Duration;

use crate::app::App;
use crate::clock::millis;

/// How often the purge runs.
pub const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// What one purge deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    /// Notifications deleted from the delivery history (0 where DynamoDB's TTL does it).
    pub notifications: u64,
    /// Messages deleted (0 where DynamoDB's TTL does it).
    pub messages: u64,
}

/// The start of the message retention now: a message received (last
/// stored) before it is past its retention.
pub fn messages_since(app: &App) -> i64 {
    app.now_ms() - millis(app.config.message_retention)
}

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

/// Deletes the history and the messages past their retentions; a failure
/// of one is logged and leaves the other to run (the next purge tries again).
pub async fn purge_once(app: &App) -> Purged {
    let history_before = app.now_ms() - millis(app.config.delivery_retention);
    let notifications = match app.history.purge(history_before).await {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e, "the delivery history could not be purged");
            0
        }
    };
    let messages = match app.store.purge_messages(messages_since(app)).await {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e, "messages past their retention could not be purged");
            0
        }
    };
    if notifications + messages > 0 {
        tracing::info!(notifications, messages, "data past its retention purged");
    }
    Purged {
        notifications,
        messages,
    }
}
