//! A subscription's delivery health: the state and rules of tenant
//! isolation, which the delivery pipeline ([`crate::delivery`]) applies and
//! the store port keeps.
//!
//! - [`Health`] ([`breaker`], [`streak`]): its circuit breaker and its run
//!   of failed attempts, stored with the subscription and written
//!   compare-and-set ([`Store::update_health`](crate::store::Store::update_health));
//! - [`cache`]: the breakers this process saw open lately, and the unparks
//!   under way;
//! - [`in_flight`]: its calls in flight in this process, capped;
//! - [`rate`]: its rate limit's slots, and the waiting lines of jobs without one.
//!
//! State and pure rules only: nothing here reads a port or calls out.

pub mod breaker;
pub mod cache;
pub mod in_flight;
pub mod rate;
pub mod streak;

pub use breaker::{BreakerRule, BreakerState, Health, Signal};
