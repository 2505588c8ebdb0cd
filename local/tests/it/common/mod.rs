//! What this binary's tests share: the real `webhooks-local` binary on a free port with its
//! own data dir (`server`), its answers checked as problem+json (`answers`), floods of events
//! (`floods`) and waits for a condition with a bound (`polling`). Callback receivers and
//! emulator checks come from `testkit`, shared with the library's tests.

#![allow(dead_code)]

mod answers;
mod floods;
mod polling;
mod server;

// Not every test file uses each of them.
#[allow(unused_imports)]
pub use testkit::{Handshake, Received, Receiver};

pub use answers::*;
pub use floods::*;
pub use polling::*;
pub use server::*;
