//! Test support, one copy for every test suite (`shared/tests`,
//! `local/tests`): a real callback receiver on loopback, signature checks
//! with the Standard Webhooks Python library, the size of a test's load per tier, and the checks that make a
//! test fail, never skip, when an emulator or tool it needs is missing.

pub mod catalogue;
pub mod customer;
pub mod emulators;
pub mod receiver;
pub mod size;
pub mod standard_webhooks;

pub use receiver::{Handshake, Received, Receiver};
