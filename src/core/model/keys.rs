//! The names lockdog gives things in Redis: lock keys with the client's prefix,
//! their fence counters, the release-notice channels, and the Redis Cluster hash
//! slots that a multi-key lock on a cluster must share (so that one script can
//! touch every key and fence counter).

use crate::core::error::{LockError, Result};

/// Longest accepted lock key, in UTF-8 bytes.
pub const MAX_KEY_BYTES: usize = 64 * 1024;
/// Most keys one lock may hold.
pub const MAX_KEYS: usize = 1024;

/// Checks and de-duplicates the keys of one lock, keeping their order (in
/// place: the caller's list is the lock's).
pub fn lock_keys(mut keys: Vec<String>) -> Result<Vec<String>> {
    if keys.is_empty() {
        return Err(LockError::invalid_value("key", "must not be an empty list"));
    }
    if keys.len() > MAX_KEYS {
        return Err(LockError::out_of_range(
            "key",
            &format!("a list of at most {MAX_KEYS} keys"),
            keys.len(),
        ));
    }
    for key in &keys {
        check_key(key)?;
    }
    // Each key kept where it first comes.
    let mut kept = 0;
    for i in 0..keys.len() {
        if !keys[..kept].contains(&keys[i]) {
            keys.swap(kept, i);
            kept += 1;
        }
    }
    keys.truncate(kept);
    Ok(keys)
}

/// One key of a lock: a non-empty string of at most `MAX_KEY_BYTES`.
pub fn check_key(key: &str) -> Result<()> {
    if key.is_empty() {
        return Err(LockError::invalid_value(
            "key",
            "must be a non-empty string",
        ));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(LockError::out_of_range(
            "key",
            &format!("at most {MAX_KEY_BYTES} bytes long"),
            format!("{} bytes", key.len()),
        ));
    }
    Ok(())
}

/// The channel prefix the release script publishes a key's release notices on.
pub const CHANNEL_PREFIX: &str = "__lockdog:released:";

/// The pub/sub channel for a stored key.
pub fn channel(key: &str) -> String {
    format!("{CHANNEL_PREFIX}{key}")
}

/// The keys as stored: `prefix` before each name (one key without a list).
pub fn prefixed(prefix: &str, names: &[String]) -> Keys {
    let prefixed = |n: &String| {
        let mut key = String::with_capacity(prefix.len() + n.len());
        key.push_str(prefix);
        key.push_str(n);
        key
    };
    match names {
        [name] => Keys::One(prefixed(name)),
        _ => Keys::Many(names.iter().map(prefixed).collect()),
    }
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

/// Whether `key` has a Redis Cluster hash tag (`{…}`, not empty).
fn has_hash_tag(key: &str) -> bool {
    key.find('{')
        .and_then(|open| key[open + 1..].find('}').map(|close| close > 0))
        .unwrap_or(false)
}

/// The companions lockdog keeps beside a lock key `k` in its hash slot, as
/// `{k}:<suffix>` (`k:<suffix>` when `k` has a hash tag), and what each is.
pub const DERIVED: [(&str, &str); 4] = [
    ("fence", "fence counter"),
    ("writer", "read-write lock's waiting-writer mark"),
    ("line:lease", "fair lock's line leases"),
    ("line", "fair lock's line"),
];

/// Refuses the key `name`, stored under `prefix`, when it is a name lockdog
/// derives for another lock key (see [`DERIVED`]): a lock there would block,
/// break or be broken by that lock.
pub fn check_not_derived(name: &str, prefix: &str) -> Result<()> {
    let stored: std::borrow::Cow<'_, str> = if prefix.is_empty() {
        name.into()
    } else {
        format!("{prefix}{name}").into()
    };
    let stored = stored.as_ref();
    for (suffix, what) in DERIVED {
        let Some(base) = stored
            .strip_suffix(suffix)
            .and_then(|b| b.strip_suffix(':'))
        else {
            continue;
        };
        if !has_hash_tag(base) {
            continue;
        }
        let of = base
            .strip_prefix('{')
            .and_then(|b| b.strip_suffix('}'))
            .filter(|b| !b.contains(['{', '}']))
            .unwrap_or(base);
        return Err(LockError::invalid_value(
            "key",
            &format!(
                "is \"{name}\", the name lockdog keeps for the {what} of lock \"{of}\" (a key ending in :fence, :writer, :line or :line:lease after a {{hash tag}} is reserved); pick another name"
            ),
        ));
    }
    Ok(())
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

/// A lock's keys: one (nearly every lock) kept without a list of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Keys {
    One(String),
    Many(Vec<String>),
}

impl std::ops::Deref for Keys {
    type Target = [String];

    fn deref(&self) -> &[String] {
        match self {
            Keys::One(key) => std::slice::from_ref(key),
            Keys::Many(keys) => keys,
        }
    }
}

impl From<Vec<String>> for Keys {
    fn from(mut keys: Vec<String>) -> Keys {
        match keys.pop() {
            Some(key) if keys.is_empty() => Keys::One(key),
            Some(key) => {
                keys.push(key);
                Keys::Many(keys)
            }
            None => Keys::Many(keys),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_key_is_kept_without_a_list() {
        assert_eq!(Keys::from(vec!["a".to_string()]), Keys::One("a".into()));
        let two = Keys::from(vec!["a".to_string(), "b".to_string()]);
        assert_eq!(&*two, ["a", "b"]);
        assert!(Keys::from(Vec::new()).is_empty());
    }

    #[test]
    fn keys_are_checked_and_deduplicated() {
        assert_eq!(
            lock_keys(vec!["a".into(), "b".into(), "a".into()]).ok(),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        let many = ["a", "b", "a", "c", "b", "d", "d", "a"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            lock_keys(many).ok(),
            Some(["a", "b", "c", "d"].map(String::from).to_vec()),
            "each where it first comes"
        );
        assert!(lock_keys(vec![]).is_err());
        for derived in [
            "{a}:fence",
            "{a}:writer",
            "{a}:line",
            "{a}:line:lease",
            "x{t}y:fence",
        ] {
            assert!(check_not_derived(derived, "").is_err(), "{derived}");
            assert!(check_not_derived(derived, "app:").is_err(), "app:{derived}");
        }
        for plain in [
            "a:fence",
            "{}:fence",
            "{a}:fencer",
            "{a}",
            "fence",
            "{a}:lines",
        ] {
            assert!(check_not_derived(plain, "").is_ok(), "{plain}");
            assert!(check_not_derived(plain, "app:").is_ok(), "app:{plain}");
        }
        // The prefix makes it one: "{a}:" + "fence" is the fence of "{a}".
        assert!(check_not_derived("fence", "{a}:").is_err());
        assert!(lock_keys(vec![String::new()]).is_err());
        assert!(lock_keys(vec!["x".repeat(MAX_KEY_BYTES + 1)]).is_err());
    }

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
