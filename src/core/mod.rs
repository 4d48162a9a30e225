//! The lock itself, free of napi: pure Rust on tokio and the redis crate.
//!
//! Every operation has one shape: send to the nodes (`node/`) → verdict
//! (`quorum.rs`, pure) → act. `acquire.rs` takes locks, `renew.rs` keeps them
//! (the watchdog's batches and manual extends), `watchdog.rs` only schedules,
//! and `client.rs` is the public entry point. `broken.rs` holds the fault
//! suite's deliberately broken variants.

mod acquire;
pub mod adopt;
pub mod broken;
pub mod client;
pub mod config;
pub mod error;
pub mod fast;
pub mod keys;
pub mod lock;
pub mod lock_state;
pub mod node;
pub mod quorum;
mod renew;
pub mod scripts;
pub mod semaphore;
mod shared;
pub mod stats;
mod sync;
pub mod time;
pub mod tls;
pub mod waiters;
pub mod watchdog;

pub use acquire::{Permits, Request, Resume};
pub use client::{Client, Inspection};
pub use config::{AcquireOptions, ClientConfig, NodeSpec};
pub use error::{ErrorCode, Fault, LockError, NodeAnswer, NodeReport};
pub use lock::Lock;
pub use shared::{Event, EventHook};
