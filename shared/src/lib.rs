//! `webhook-core`: everything the webhook subscription service does, behind
//! ports, independent of the runtime (AWS Lambda or `webhooks-local`).
//!
//! - [`model`]: the wire types of the public interface
//! - [`filter`]: the event filter grammar
//! - [`subscription`], [`rotation`], [`message`], [`deliveries`]: the handlers
//! - [`routes`]: the endpoints, described once for both runtimes
//! - [`console`]: the web console's embedded page and files, with their headers
//! - [`http`]: dispatch, parsing and problem+json rendering shared by runtimes
//! - [`list_json`]: the JSON of a list page, written directly (serde_json's bytes)
//! - [`auth`]: API keys, bearer tokens, organization and scopes
//! - [`callback`]: SSRF policy, handshake (and delivery) to client callbacks
//! - [`ingest`], [`notification`], [`delivery`], [`signature`]: events to signed notifications
//! - [`health`]: a subscription's breaker, failure streak and calls in flight (the state of tenant isolation)
//! - [`failure`]: why a call to a callback failed, typed once
//! - [`notice`], [`reminders`]: operational notifications (a subscription failing, recovered, disabled, expiring)
//! - [`clock`]: the clock port
//! - [`queue`]: the delivery queue and outbox ports
//! - [`store`]: the store port, its orders and its business rules (`store::rules`)
//! - [`history`]: the delivery history port
//! - [`retention`]: the purge of history and messages past their retention
//! - [`sqlite`], [`aws`]: the adapters (SQLite file; DynamoDB and SQS)
//! - [`services`]: builds the adapters of a backend, for every runtime
//! - [`telemetry`]: Prometheus metrics (hooks called by the pipeline)

#![warn(missing_docs)]

pub mod app;
pub mod auth;
#[cfg(feature = "aws")]
pub mod aws;
pub mod call_bounds;
pub mod callback;
pub mod clock;
pub mod config;
pub mod console;
pub mod deliveries;
pub mod delivery;
pub mod error;
pub mod failure;
pub mod filter;
pub mod health;
pub mod history;
pub mod http;
pub mod ids;
pub mod ingest;
#[cfg(feature = "aws")]
pub mod lambda;
pub mod list_json;
pub mod message;
pub mod model;
pub mod notice;
pub mod notification;
pub mod page;
pub mod queue;
pub mod reminders;
pub mod retention;
pub mod rotation;
pub mod routes;
pub mod secret;
pub mod services;
pub mod signature;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod store;
pub mod subscription;
pub mod telemetry;

pub use app::App;
pub use auth::Caller;
pub use config::{Config, Profile};
pub use error::ApiError;
