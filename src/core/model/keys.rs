//! The names lockdog derives from a lock key in Redis: its fence counter,
//! its release-notice channel, and the Redis Cluster hash slot that a
//! multi-key lock on a cluster must share (so that one script can touch
//! every key and fence counter).

use super::lock::has_hash_tag;
use crate::core::error::{LockError, Result};

/// The channel prefix the release script publishes a key's release notices on.
pub const CHANNEL_PREFIX: &str = "__lockdog:released:";

/// The pub/sub channel for a stored key.
pub fn channel(key: &str) -> String {
    format!("{CHANNEL_PREFIX}{key}")
}

/// The fence counter of `key`, in the same hash slot: a key with a hash tag
/// keeps it, any other key becomes the tag (which only works for a key without
/// `}`; cluster locks with fencing reject the rest).
pub fn fence_key(key: &str) -> String {
    if has_hash_tag(key) {
        format!("{key}:fence")
    } else {
        format!("{{{key}}}:fence")
    }
}

/// Number of hash slots in a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// CRC16/XMODEM (polynomial 0x1021, initial value 0), as Redis Cluster uses it.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The part of `key` Redis hashes: the text between the first `{` and the next
/// `}` when that is not empty, else the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The hash slot of `key` (what `CLUSTER KEYSLOT` answers).
pub fn key_slot(key: &str) -> u16 {
    crc16(hash_tag(key.as_bytes())) % SLOTS
}

/// Checks that the keys of one cluster lock share a slot. `names` are the keys as
/// the caller gave them, `keys` the same with the client's prefix, and
/// `fence_keys` their fence counters in the same order (empty without fencing).
pub fn check_one_slot(names: &[String], keys: &[String], fence_keys: &[String]) -> Result<()> {
    let Some(first) = keys.first() else {
        return Ok(());
    };
    let slot = key_slot(first);
    if let Some(i) = keys.iter().position(|k| key_slot(k) != slot) {
        return Err(LockError::invalid_value(
            "key",
            &format!(
                "names keys in different Redis Cluster hash slots (\"{}\" is in slot {slot}, \"{}\" in slot {}), \
                 but one lock on a cluster must keep all its keys in one slot. Give them a common hash tag: \
                 only the part inside {{…}} is hashed, so \"order:{{42}}:pay\" and \"order:{{42}}:ship\" share a slot",
                names[0],
                names[i],
                key_slot(&keys[i]),
            ),
        ));
    }
    if let Some(i) = fence_keys.iter().position(|k| key_slot(k) != slot) {
        return Err(LockError::invalid_value(
            "key",
            &format!(
                "\"{}\" has a '}}' but no hash tag, so its fence counter cannot share its slot; \
                 with fencing on a cluster, give it a hash tag such as \"{{{}}}\"",
                names[i],
                names[i].replace(['{', '}'], "_"),
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::prefixed;

    #[test]
    fn fence_key_names() {
        assert_eq!(fence_key("lock:order:1"), "{lock:order:1}:fence");
        assert_eq!(fence_key("a{user:7}b"), "a{user:7}b:fence");
        // Not the slot of "a{}b": a cluster lock with fencing rejects such keys.
        assert_eq!(fence_key("a{}b"), "{a{}b}:fence");
    }

    #[test]
    fn keys_are_prefixed_and_announced_on_their_channel() {
        assert_eq!(*prefixed("p:", &["a".into()]), ["p:a"]);
        assert_eq!(channel("p:a"), "__lockdog:released:p:a");
    }

    #[test]
    fn slots_match_redis() {
        // Values from CLUSTER KEYSLOT and the Redis Cluster specification.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("bar"), 5061);
        assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
        assert_eq!(key_slot("foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
        assert_eq!(key_slot("foo{{bar}}zap"), key_slot("{bar"));
        assert_eq!(key_slot("foo{bar}{zap}"), key_slot("bar"));
        assert_eq!(key_slot(""), 0);
    }

    #[test]
    fn redis_crate_agrees() {
        use redis::cluster_routing::Slot;
        for key in ["foo", "a{b}c", "{}", "x{}y{z}", "order:{42}:pay", "é{ü}"] {
            let expected = Slot::new(key_slot(key)).expect("slot in range");
            assert_eq!(Slot::for_key(key), expected, "{key}");
        }
    }

    #[test]
    fn fence_keys_share_the_slot_of_ordinary_keys() {
        for key in ["lock:order:1", "a{user:7}b", "{x}", "a{b"] {
            assert_eq!(key_slot(&fence_key(key)), key_slot(key), "{key}");
        }
    }

    #[test]
    fn cross_slot_keys_are_rejected_with_a_hint() {
        let names: Vec<String> = vec!["order:{42}:pay".into(), "order:{42}:ship".into()];
        assert!(check_one_slot(&names, &names, &[]).is_ok());
        let names: Vec<String> = vec!["order:42:pay".into(), "order:42:ship".into()];
        let err = check_one_slot(&names, &names, &[]).expect_err("cross-slot");
        assert_eq!(err.code, crate::core::ErrorCode::InvalidArgValue);
        assert!(err.message.contains("hash tag"), "{}", err.message);
        assert!(err.message.contains("order:{42}:pay"), "{}", err.message);
        let odd: Vec<String> = vec!["a}b".into()];
        let fences: Vec<String> = odd.iter().map(|k| fence_key(k)).collect();
        let err = check_one_slot(&odd, &odd, &fences).expect_err("fence elsewhere");
        assert!(err.message.contains("fence"), "{}", err.message);
    }
}
