//! Validated settings with their defaults. Every default lives here, once
//! (this file); `client.rs` is a client's settings and the bounds they set
//! for each lock, and what a lock node is (a master, a cluster, a master
//! found through Sentinel), `acquire.rs` one acquisition's options
//! and their resolved form, `numbers.rs` the checks on numbers from JS.

use std::time::Duration;

mod acquire;
mod client;
mod numbers;
#[cfg(test)]
mod tests;

pub use crate::core::tls::TlsConfig;
pub use acquire::{AcquireOptions, AcquireSpec};
pub use client::{ClientConfig, NodeSpec, SentinelConfig};
pub use numbers::{lease_millis, millis, whole_number};

/// Largest wait, delay or timeout accepted, in ms (what a 32-bit signed timer can hold).
pub const MAX_MS: u64 = 2_147_483_647;
/// Largest lease accepted, in ms: every whole number a JS number holds exactly
/// (`Number.MAX_SAFE_INTEGER`). Redis takes 64-bit PX values, and no timer is
/// armed for a lease's full length, so the timer limit does not apply.
pub const MAX_LEASE_MS: u64 = (1 << 53) - 1;

/// The node a client without `url`, `nodes` or `cluster` uses when [`URL_ENV`] is unset or empty.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";
/// The environment variable whose (non-empty) value replaces [`DEFAULT_URL`].
pub const URL_ENV: &str = "REDIS_URL";
pub const DEFAULT_TTL: Duration = Duration::from_millis(30_000);
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(2_000);
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_millis(1_000);
pub const DEFAULT_DRIFT_FACTOR: f64 = 0.01;
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(100);
pub const DEFAULT_RETRY_JITTER: Duration = Duration::from_millis(100);
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_millis(10_000);
pub const DEFAULT_WAIT_REPLICAS_TIMEOUT: Duration = Duration::from_millis(100);
/// Share of the TTL a Redlock node gets to answer an acquire or renewal.
pub const NODE_TIMEOUT_SHARE: f64 = 0.05;
/// The least a Redlock node gets by default (short leases' 5% is below what a
/// busy machine's scheduling takes), unless that is over a third of the TTL.
pub const NODE_TIMEOUT_FLOOR: Duration = Duration::from_millis(50);
