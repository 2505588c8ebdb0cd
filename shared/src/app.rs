//! What every handler works with, built once at init: configuration, the
//! store, the delivery history, the callback client and the clock.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::callback::{AddressPolicy, CallbackClient, Dns, SystemDns};
use crate::clock::Clock;
use crate::config::Config;
use crate::destinations::Destinations;
use crate::health::cache::HealthCache;
use crate::health::in_flight::InFlight;
use crate::health::rate::RateLines;
use crate::history::DeliveryHistory;
use crate::store::Store;

/// The service's shared state, built once at init and borrowed by every handler and worker.
pub struct App {
    /// The settings read from the environment at start.
    pub config: Config,
    /// Subscriptions, messages and the rest of the service's state (SQLite or DynamoDB).
    pub store: Arc<dyn Store>,
    /// Every notification and attempt (the same adapter as the store).
    pub history: Arc<dyn DeliveryHistory>,
    /// Calls client callbacks (handshakes and deliveries) under the SSRF policy of `config`.
    pub callbacks: CallbackClient,
    /// Where every "now" comes from: the wall clock, or a manual clock in tests.
    pub clock: Arc<dyn Clock>,
    /// Notified when notifications are enqueued, to wake delivery workers.
    pub delivery_wake: Arc<Notify>,
    /// Calls in flight per subscription, capped (this process).
    pub in_flight: InFlight,
    /// Open breakers seen lately (this process).
    pub breakers: HealthCache,
    /// Whether the delivery queue keeps a subscription's order (`ordered`):
    /// the SQLite queue does, and SQS where the FIFO delivery queue is
    /// configured (`WEBHOOKS_ORDERED_QUEUE_URL`); elsewhere creates asking
    /// for it are refused.
    pub ordered_delivery: bool,
    /// Waiting lines of jobs over their subscription's rate limit (this process).
    pub rates: RateLines,
    /// Sends to AWS destinations (SQS queues, EventBridge buses); none where
    /// the runtime has no AWS SDK, and then creates naming one are refused.
    pub destinations: Option<Arc<dyn Destinations>>,
}

impl App {
    /// The app on `store`, which also keeps the delivery history.
    pub fn new<S: Store + DeliveryHistory + 'static>(config: Config, store: Arc<S>) -> Self {
        Self::with_dns(config, store, Arc::new(SystemDns))
    }

    /// [`App::new`] resolving callback hosts with `dns` (tests pin names to addresses).
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
            rates: RateLines::default(),
            callbacks: CallbackClient::new(policy, dns),
            config,
            history: store.clone(),
            store,
            clock: crate::clock::system(),
            delivery_wake: Arc::new(Notify::new()),
            ordered_delivery: false,
            destinations: None,
        }
    }

    /// The same app on another clock (tests move a [`ManualClock`](crate::clock::ManualClock)).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The same app on a delivery queue that keeps order (SQLite's).
    pub fn with_ordered_delivery(mut self) -> Self {
        self.ordered_delivery = true;
        self
    }

    /// Epoch milliseconds now, on the app's clock.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
}
