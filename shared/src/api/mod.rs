//! The API's handlers, one module per resource: each takes the [`App`]
//! and the authenticated caller, and answers a model type or an
//! [`ApiError`] (plain async functions over the ports, called by the Lambda
//! functions and by `webhooks-local` alike, through [`crate::http`]).
//!
//! - [`subscriptions`]: create (validate, handshake, upsert), list, get,
//!   delete, the signing secret;
//! - [`subscription_request`]: a create's request parsed and checked;
//! - [`rotation`]: the signing secret's rotation;
//! - [`messages`]: a message by id;
//! - [`event_types`]: the event catalogue, the same for every organization;
//! - [`notifications`]: a subscription's delivery history (its
//!   notifications, one with its attempts, resend, recover, stats);
//! - [`problem`]: how a port's failure is answered (problem+json), logged
//!   and counted.
//!
//! [`App`]: crate::app::App
//! [`ApiError`]: crate::error::ApiError

pub mod event_types;
pub mod messages;
pub mod notifications;
pub mod problem;
pub mod rotation;
pub mod subscription_request;
pub mod subscriptions;
