//! The data every layer of the lock shares, with no I/O and no awaits: what
//! kind of lock an acquisition takes, the token it carries and the
//! [`LockKind`] a lock keeps in its state (`kind.rs`), the keys and leases
//! one attempt sends to a node (`lease.rs`), the keys and channels of a lock
//! (`keys.rs`). Every other layer builds on it; it builds on none of them.

pub mod keys;
mod kind;
mod lease;

pub use kind::{
    check_permits, fair, fair_permits, rw_permits, token, Kind, LockKind, Permits, Token,
    MAX_LIMIT, READERS,
};
pub use lease::{beside, line_keys, writer_key, FairLease, PermitsLease};
