//! What every handler works with, built once at init: configuration, the
//! store, the delivery history, the callback client and the clock.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::callback::{AddressPolicy, CallbackClient, Dns, SystemDns};
use crate::clock::Clock;
use crate::config::Config;
use crate::delivery::health_cache::HealthCache;
use crate::delivery::in_flight::InFlight;
use crate::history::DeliveryHistory;
use crate::store::Store;

pub struct App {
    pub config: Config,
    pub store: Arc<dyn Store>,
    /// Every notification and attempt (the same adapter as the store).
    pub history: Arc<dyn DeliveryHistory>,
    pub callbacks: CallbackClient,
    pub clock: Arc<dyn Clock>,
    /// Notified when notifications are enqueued, to wake delivery workers.
    pub delivery_wake: Arc<Notify>,
    /// Calls in flight per subscription, capped (this process).
    pub in_flight: InFlight,
    /// Open breakers seen lately (this process).
    pub breakers: HealthCache,
}

impl App {
    /// The app on `store`, which also keeps the delivery history.
    pub fn new<S: Store + DeliveryHistory + 'static>(config: Config, store: Arc<S>) -> Self {
        Self::with_dns(config, store, Arc::new(SystemDns))
    }

    pub fn with_dns<S: Store + DeliveryHistory + 'static>(
        config: Config,
        store: Arc<S>,
        dns: Arc<dyn Dns>,
    ) -> Self {
        let policy =
            AddressPolicy::new(config.allow_private_callbacks, config.allow_http_callbacks);
        App {
            in_flight: InFlight::new(config.max_in_flight_per_subscription),
            breakers: HealthCache::default(),
            callbacks: CallbackClient::new(policy, dns),
            config,
            history: store.clone(),
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
