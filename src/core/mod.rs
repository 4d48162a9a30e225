//! The lock itself, free of napi: pure Rust on tokio and the redis crate.

pub mod broken;
pub mod client;
pub mod config;
pub mod error;
pub mod lock;
pub mod node;
pub mod scripts;
pub mod slot;
pub mod stats;
pub mod waiters;
pub mod watchdog;

pub use client::{Client, Event, EventHook, Inspection, Lock};
pub use config::{AcquireOptions, ClientConfig};
pub use error::{ErrorCode, LockError, NodeAnswer, NodeReport};
