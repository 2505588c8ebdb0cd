//! What every handler works with, built once at init: configuration, the
//! store, the callback client and the clock.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::callback::{AddressPolicy, CallbackClient, Dns, SystemDns};
use crate::clock::Clock;
use crate::config::Config;
use crate::store::Store;

pub struct App {
    pub config: Config,
    pub store: Arc<dyn Store>,
    pub callbacks: CallbackClient,
    pub clock: Arc<dyn Clock>,
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
            clock: crate::clock::system(),
            delivery_wake: Arc::new(Notify::new()),
        }
    }

    /// The same app on another clock (tests move a [`ManualClock`](crate::clock::ManualClock)).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Epoch milliseconds now, on the app's clock.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
}
