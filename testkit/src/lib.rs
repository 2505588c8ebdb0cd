//! Test support, one copy for every test suite (`shared/tests`,
//! `local/tests`): a real callback receiver on loopback, and the checks that
//! make a test fail, never skip, when an emulator it needs is not running.

pub mod emulators;
pub mod receiver;

pub use receiver::{Handshake, Received, Receiver};
