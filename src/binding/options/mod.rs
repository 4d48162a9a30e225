//! Options as JavaScript passes them. Numbers arrive as doubles and are checked
//! by the core (`ERR_OUT_OF_RANGE` for NaN, fractions, negatives, too large).
//! `client.rs` is a client's options, `acquire.rs` one acquisition's (as an
//! object, or packed in a typed array: the form `lib/` sends) and what it
//! takes (lock, permits, a read-write side, fair or not),
//! `reports.rs` what goes back to JS (counters, an inspection, a count).

mod acquire;
mod client;
mod reports;

pub use acquire::{AcquireKind, AcquireOptions, PACKED_LEN};
pub use client::{LockClientOptions, TlsOptions};
pub use reports::{LockInspection, LockStats, NodeHealth, NodeRecovered, SemaphoreCount};
