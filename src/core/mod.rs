//! The lock itself, free of napi: pure Rust on tokio and the redis crate.
//!
//! Every operation has one shape: send to the nodes (`runtime/`, `uvloop/`) →
//! verdict (`quorum/`, pure) → act. `model/` is the data they all share
//! (lock kinds, permits, tokens, leases, requests, attempts), `acquire/` the
//! engine that takes locks, `renew.rs` keeps them (the watchdog's batches and
//! manual extends), `watchdog.rs` only schedules, and `client/` is the public
//! entry point. `broken.rs` holds the fault suite's deliberately broken
//! variants. The modules import one another without a cycle
//! (`__test__/layout-rust.test.js` checks it): `model` and `quorum` build on
//! no transport, and `runtime` on no engine.
//!
//! `ops/` writes each lock operation once, sans-I/O (what to send, each
//! node's reply in, the outcome); `runtime/` (the Rust runtime's, tokio's,
//! connections) and `uvloop/` (the JS thread's own libuv loop) are the
//! transports that drive it.

mod acquire;
pub mod adopt;
pub mod broken;
pub mod client;
pub mod config;
pub mod error;
pub mod health;
pub mod keys;
pub mod lock;
pub mod lock_state;
pub mod memory;
pub mod model;
pub mod ops;
pub mod quorum;
mod renew;
pub mod runtime;
pub mod scripts;
pub mod semaphore;
mod shared;
pub mod stats;
mod sync;
pub mod time;
pub mod tls;
#[cfg(test)]
mod transports_agree;
pub mod uvloop;
pub mod waiters;
pub mod watchdog;

pub use client::{Client, Inspection, WeakClient};
pub use config::{AcquireOptions, ClientConfig, NodeSpec};
pub use error::{ErrorCode, Fault, LockError, NodeAnswer, NodeReport};
pub use lock::Lock;
pub use model::{Permits, Request};
pub use shared::{Event, EventHook};
