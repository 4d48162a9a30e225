//! The data every layer of the lock shares, with no I/O and no awaits: what
//! kind of lock an acquisition takes and the token it carries (`kind.rs`),
//! the keys and leases one attempt sends to a node (`lease.rs`), and the
//! checked request with what an attempt came back with (`request.rs`).
//! The transports (`node/`, `fast/`) and the engine (`acquire/`) both build
//! on it; it builds on neither.

mod kind;
mod lease;
mod request;

pub use kind::{
    check_permits, fair, fair_permits, is_slot_attempt, rw_permits, token, Kind, Permits,
    FAIR_TOKEN, MAX_LIMIT, READERS,
};
pub use lease::{beside, line_keys, writer_key, FairLease, Lease};
pub(crate) use request::{Attempt, Judged, SentUndo, Won};
pub use request::{Request, Resume};
