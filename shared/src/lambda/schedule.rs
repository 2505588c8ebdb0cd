//! `remind-expiring`: run every minute by an EventBridge schedule, it tells
//! organizations about their subscriptions expiring within
//! `WEBHOOKS_EXPIRY_NOTICE` ([`crate::reminders`]). The event carries
//! nothing it needs; a failure is the invocation's error (the function's
//! `Errors` alarm), and the next run picks up what this one left.

use serde_json::{json, Value};

use crate::app::App;
use crate::queue::Outbox;
use crate::reminders;
use crate::telemetry::emf;

/// The `remind-expiring` handler: sends the expiry notices due now and answers how many (`reminded`).
pub async fn remind_expiring(
    app: &App,
    outbox: &dyn Outbox,
    _scheduled: Value,
) -> Result<Value, crate::queue::StoreOrQueueError> {
    let reminded = reminders::remind_expiring(app, outbox).await?;
    emf::emit(emf::reminder_line(reminded as u64, app.now_ms()));
    Ok(json!({ "reminded": reminded }))
}
