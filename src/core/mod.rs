//! The lock itself, free of napi: pure Rust on tokio and the redis crate.
//!
//! Layers, each built on the ones before it and on none after it
//! (`__test__/layout-rust.test.js` checks it):
//!
//! - `model/`: data (lock kinds, permits, tokens, leases, keys); `config/`:
//!   validated options; `quorum/`: the pure verdicts;
//! - `ops/`: every lock operation sans-I/O (what to send, each node's reply
//!   in, the outcome), the acquisition as one machine (`ops/acquisition`),
//!   the one collector of node replies and the record a lock keeps of them
//!   (`ops/gather.rs`), the Lua scripts;
//! - `transport/`: the bytes: `tokio/` the Rust runtime's redis-rs
//!   connections (Sentinel, Cluster, pub/sub, pipelined renewals), `uvloop/`
//!   a plain connection read and written on the JS thread's own loop;
//! - `engine/`: a client's shared state (`inner.rs`), a won attempt becoming
//!   a held lock (`acquire.rs`), waiting in line, the watchdog, the lock's
//!   state, adopt, semaphores' counts, node health;
//! - `drivers/`: what runs the machine and the operations from start to end,
//!   `tokio.rs` in a task, `uvloop/` on the JS thread;
//! - `client/`: the entry point.
//!
//! `error.rs`, `base.rs` (the clock, std locks, spawning, a closing latch,
//! giving memory back), `tls.rs` and `broken.rs` (the fault suite's deliberately broken
//! variants) are used by every layer.

pub mod base;
pub mod broken;
pub mod client;
pub mod config;
pub mod drivers;
pub mod engine;
pub mod error;
pub mod model;
pub mod ops;
pub mod quorum;
pub mod tls;
pub mod transport;

pub use client::{Client, Inspection, WeakClient};
pub use config::{AcquireOptions, AcquireSpec, ClientConfig, NodeSpec};
pub use engine::acquire::Request;
pub use engine::inner::{Event, EventHook};
pub use engine::lock::Lock;
pub use error::{ErrorCode, Fault, LockError, NodeAnswer, NodeReport};
pub use model::Permits;
