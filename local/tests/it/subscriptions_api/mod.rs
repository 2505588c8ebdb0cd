//! The subscriptions API end to end: the real binary over HTTP, real callback receivers. One
//! file per behaviour; the module name is what `scripts/test.sh` selects to run them on both
//! backends.

mod access;
mod bad_input;
mod lifecycle;
mod listing;
