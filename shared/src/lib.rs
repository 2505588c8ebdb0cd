//! `webhook-core`: everything the webhook subscription service does, behind
//! ports, independent of the runtime (AWS Lambda or `webhooks-local`).
//!
//! The modules stand in layers, each importing only from the layers below
//! it (`shared/tests/architecture.rs` holds the table and checks it):
//!
//! - foundation: [`ids`], [`model`], [`clock`], [`error`], [`failure`],
//!   [`secret`], [`signature`], [`filter`], [`payload_filter`], [`page`],
//!   [`call_bounds`], [`custom_headers`],
//!   [`notification`] (the payloads), [`telemetry`] (metrics and traces,
//!   handed labels);
//! - domain: [`health`] (breaker, failure streak, calls in flight),
//!   [`config`], [`auth`], [`retry_schedule`] (a subscription's own);
//! - ports: [`store`] (with its orders and business rules, `store::rules`),
//!   [`queue`] (delivery queue and outbox), [`history`], [`callback`]
//!   (the outbound calls under the SSRF policy);
//! - [`app`]: what every handler and worker is given;
//! - use cases: [`api`] (the handlers), [`ingest`], [`delivery`] (the
//!   pipeline), [`notice`] and [`reminders`] (operational notifications),
//!   [`retention`];
//! - adapters: [`sqlite`], [`aws`] (DynamoDB and SQS), named only by
//!   [`services`], which builds them for every runtime, and by [`lambda`],
//!   the face of the AWS runtime;
//! - edges: [`routes`], [`http`], [`list_json`], [`console`], [`lambda`].

#![warn(missing_docs)]

pub mod api;
pub mod app;
pub mod auth;
#[cfg(feature = "aws")]
pub mod aws;
pub mod call_bounds;
pub mod callback;
pub mod clock;
pub mod config;
pub mod console;
pub mod custom_headers;
pub mod deadline;
pub mod delivery;
pub mod destinations;
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
pub mod model;
pub mod notice;
pub mod notification;
pub mod page;
pub mod payload_filter;
pub mod queue;
pub mod reminders;
pub mod retention;
pub mod retry_schedule;
pub mod routes;
pub mod secret;
pub mod services;
pub mod signature;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod store;
pub mod telemetry;

pub use app::App;
pub use auth::Caller;
pub use config::{Config, Profile};
pub use error::ApiError;
