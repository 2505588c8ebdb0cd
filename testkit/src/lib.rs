//! Test support, one copy for every test suite (`shared/tests`, `local/tests`, `bench`): a real
//! callback receiver on loopback, signature checks with the Standard Webhooks Python library,
//! the size of a test's load per tier, the checks that make a test fail, never skip, when an
//! emulator or tool it needs is missing, and the suites and harnesses more than one test
//! binary runs: the store and queue conformance suites, the sample events of `events/`, and
//! (feature `aws`) DynamoDB Local's tables and the Lambda handlers' harness.
//!
//! Everything here goes through webhook-core's public API: a test binary includes no support
//! file by `#[path]`.

pub mod catalogue;
pub mod customer;
#[cfg(feature = "aws")]
pub mod dynamodb_local;
pub mod emulators;
#[cfg(feature = "aws")]
pub mod lambda;
pub mod queue_conformance;
pub mod receiver;
pub mod sample_events;
pub mod size;
pub mod standard_webhooks;
pub mod store_conformance;

pub use receiver::{Handshake, Received, Receiver};
