//! The ports and configuration every handler works with, built once at init.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::callback::{AddressPolicy, CallbackClient, Dns, SystemDns};
use crate::config::Config;
use crate::queue::Outbox;
use crate::store::Store;

pub struct App {
    pub config: Config,
    pub store: Arc<dyn Store>,
    pub callbacks: CallbackClient,
    /// Where ingested events go; runtimes without ingestion leave it unset.
    pub outbox: Option<Arc<dyn Outbox>>,
    /// Notified when notifications are enqueued, to wake delivery workers.
    pub delivery_wake: Arc<Notify>,
}

impl App {
    pub fn new(config: Config, store: Arc<dyn Store>) -> Self {
        Self::with_dns(config, store, Arc::new(SystemDns))
    }

    pub fn with_dns(config: Config, store: Arc<dyn Store>, dns: Arc<dyn Dns>) -> Self {
        let policy =
            AddressPolicy::new(config.allow_private_callbacks, config.allow_http_callbacks);
        App {
            callbacks: CallbackClient::new(policy, dns),
            config,
            store,
            outbox: None,
            delivery_wake: Arc::new(Notify::new()),
        }
    }

    pub fn with_outbox(mut self, outbox: Arc<dyn Outbox>) -> Self {
        self.outbox = Some(outbox);
        self
    }
}

/// Epoch milliseconds now.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// ISO 8601 UTC with milliseconds: `2024-03-10T18:07:52.534Z`.
pub fn iso_millis(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}
