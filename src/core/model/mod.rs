//! The data every layer of the lock shares, with no I/O and no awaits: what
//! kind of lock an acquisition takes, the token it carries and the
//! [`LockKind`] a lock keeps in its state (`kind.rs`), the keys and leases
//! one attempt sends to a node (`lease.rs`), each node's answer to a lock's
//! last operation (`answers.rs`), and the checked request (`request.rs`).
//! The transports (`runtime/`, `uvloop/`) and the engine (`acquire/`) both build
//! on it; it builds on neither.

mod answers;
mod kind;
mod lease;
mod request;

pub use answers::{Answers, LateAnswers};
pub use kind::{
    check_permits, fair, fair_permits, rw_permits, token, Kind, LockKind, Permits, MAX_LIMIT,
    READERS,
};
pub use lease::{beside, line_keys, writer_key, FairLease, PermitsLease};
pub use request::Request;
