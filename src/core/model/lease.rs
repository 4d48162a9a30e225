//! Permits (checked against their limit, a fair lock's, a read-write
//! lock's), and what one attempt sends to a node: the keys and leases of a semaphore's or
//! read-write lock's attempt ([`PermitsLease`]) and of a fair one ([`FairLease`]),
//! and the companion keys they live beside, in the lock key's hash slot.

use super::lock::{Kind, Permits};
use crate::core::error::{LockError, Result};
use crate::core::model::keys;

/// The largest `limit` accepted: every acquisition counts the holders.
pub const MAX_LIMIT: u32 = 100_000;

/// How many readers a read-write lock admits at once; its writer takes them all.
pub const READERS: u32 = 10_000;

/// Checks a semaphore's `limit` and the `permits` one acquisition asks for.
pub fn check_permits(limit: u32, permits: u32) -> Result<Permits> {
    if limit == 0 || limit > MAX_LIMIT {
        return Err(LockError::out_of_range(
            "limit",
            &format!(">= 1 and <= {MAX_LIMIT}"),
            limit,
        ));
    }
    if permits == 0 || permits > limit {
        return Err(LockError::out_of_range(
            "permits",
            &format!(">= 1 and <= limit ({limit})"),
            permits,
        ));
    }
    Ok(Permits {
        limit,
        permits,
        kind: Kind::Semaphore,
    })
}

/// A fair lock: one holder, waiters served in arrival order across processes.
pub fn fair_permits() -> Permits {
    Permits {
        limit: 1,
        permits: 1,
        kind: Kind::Fair,
    }
}

/// A read-write lock's reader (`write` false) or writer.
pub fn rw_permits(write: bool) -> Permits {
    Permits {
        limit: READERS,
        permits: if write { READERS } else { 1 },
        kind: if write { Kind::Write } else { Kind::Read },
    }
}

/// The same permits, served in arrival order.
pub fn fair(p: Permits) -> Permits {
    Permits {
        kind: Kind::FairPermits,
        ..p
    }
}

/// One attempt's keys and leases on a node.
pub struct PermitsLease<'a> {
    pub key: &'a str,
    /// Where a waiting writer marks itself (read-write locks).
    pub writer: &'a str,
    pub token: &'a str,
    pub ttl_ms: u64,
    /// How long a waiting writer's mark lives.
    pub mark_ms: u64,
}

/// One fair attempt's keys and leases on a node.
pub struct FairLease<'a> {
    pub key: &'a str,
    pub line: &'a [String; 2],
    pub token: &'a str,
    pub ttl_ms: u64,
    /// How long the caller's place lasts unless renewed (0: one attempt, no place).
    pub place_ms: u64,
    /// The caller's attempt number (fair locks), stored with its place.
    pub attempt: u64,
    /// The key's fence counter when the client hands out fencing tokens (fair
    /// locks; `None` for permits, which take no fence).
    pub fence: Option<&'a str>,
}

/// A companion key of `key` in its hash slot: `{key}:<what>` (or `key:<what>`
/// for a key with a hash tag).
pub fn beside(key: &str, what: &str) -> String {
    let fence = keys::fence_key(key);
    format!("{}:{what}", fence.trim_end_matches(":fence"))
}

/// The key a waiting writer marks itself in, in the same hash slot as `key`.
pub fn writer_key(key: &str) -> String {
    beside(key, "writer")
}

/// The line's two keys for `key`, in its hash slot: places by arrival, and their leases.
pub fn line_keys(key: &str) -> [String; 2] {
    [beside(key, "line"), beside(key, "line:lease")]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::ErrorCode;
    use crate::core::model::lock::tests::sem;

    #[test]
    fn a_writer_marks_itself_beside_the_key() {
        assert_eq!(writer_key("a"), "{a}:writer");
        assert_eq!(writer_key("{t}a"), "{t}a:writer");
    }

    #[test]
    fn the_line_lives_in_the_keys_hash_slot() {
        assert_eq!(line_keys("q"), ["{q}:line", "{q}:line:lease"]);
        assert_eq!(line_keys("{t}q"), ["{t}q:line", "{t}q:line:lease"]);
        for k in line_keys("orders:7") {
            assert_eq!(keys::key_slot(&k), keys::key_slot("{orders:7}"), "{k}");
        }
    }

    #[test]
    fn companion_keys_follow_the_fence_keys_naming() {
        assert_eq!(beside("k", "x"), "{k}:x");
        assert_eq!(beside("{h}k", "line"), "{h}k:line");
    }

    #[test]
    fn permits_are_checked_against_their_limit() {
        assert_eq!(check_permits(5, 2).ok(), Some(sem(5, 2, Kind::Semaphore)));
        assert!(check_permits(MAX_LIMIT, MAX_LIMIT).is_ok());
        for (limit, permits) in [(0, 1), (MAX_LIMIT + 1, 1), (3, 0), (3, 4)] {
            let e = check_permits(limit, permits).err();
            assert_eq!(
                e.map(|e| e.code),
                Some(ErrorCode::OutOfRange),
                "{limit}/{permits}"
            );
        }
    }

    #[test]
    fn a_writer_takes_every_reader_permit() {
        assert_eq!(rw_permits(false), sem(READERS, 1, Kind::Read));
        assert_eq!(rw_permits(true), sem(READERS, READERS, Kind::Write));
        assert_eq!(fair(rw_permits(true)).kind, Kind::FairPermits);
        assert_eq!(fair(rw_permits(true)).permits, READERS);
        assert_eq!(fair_permits(), sem(1, 1, Kind::Fair));
    }
}
