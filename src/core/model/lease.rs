//! What one attempt sends to a node: the keys and leases of a semaphore's or
//! read-write lock's attempt ([`PermitsLease`]) and of a fair one ([`FairLease`]),
//! and the companion keys they live beside, in the lock key's hash slot.

use crate::core::model::keys;

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
}
