//! The data every layer of the lock shares, with no I/O and no awaits: one
//! lock as data (`lock.rs`: its keys, what kind of lock it takes, the token
//! it carries and the [`LockKind`] it keeps in its state), permits and the
//! keys and leases one attempt sends to a node (`lease.rs`), the names
//! derived from a lock key: fence counters, channels, cluster hash slots
//! (`keys.rs`). Every other layer builds on it; it builds on none of them.

pub mod keys;
mod lease;
mod lock;

pub use lease::{
    beside, check_permits, fair, fair_permits, line_keys, rw_permits, writer_key, FairLease,
    PermitsLease, MAX_LIMIT, READERS,
};
pub use lock::{
    check_key, check_not_derived, lock_keys, prefixed, token, Keys, Kind, LockKind, Permits, Token,
    DERIVED, MAX_KEYS, MAX_KEY_BYTES,
};
