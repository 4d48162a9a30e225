//! One lock as data: its keys (checked, and stored under the client's
//! prefix), what it takes (a plain lock, or permits of a semaphore, a
//! read-write lock or a fair line) and the token that says so. The
//! [`LockKind`] decided here is kept in the lock's state: this process
//! never parses its own tokens to know how to give a lock back. The token
//! carries the permits it holds (`<permits>:<uuid>`), so the shared renewal
//! and release scripts need nothing else to know about it.

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

/// Whether `key` has a Redis Cluster hash tag (`{…}`, not empty).
pub(super) fn has_hash_tag(key: &str) -> bool {
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

/// How many permits to take of a semaphore of `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permits {
    pub limit: u32,
    pub permits: u32,
    pub kind: Kind,
}

/// What the permits are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A counting semaphore.
    Semaphore,
    /// A read-write lock's reader (one permit).
    Read,
    /// A read-write lock's writer (every permit); a waiting writer holds new readers off.
    Write,
    /// A lock served in arrival order across processes (a line kept in Redis).
    Fair,
    /// A counting semaphore on several nodes (Redlock): `limit` numbered slots,
    /// each a mutex a majority of nodes must grant; a holder takes `permits`
    /// distinct slots, all granted by the same majority.
    Slots,
    /// A semaphore's or read-write lock's permits served in arrival order
    /// across processes (a line kept in Redis beside the key, see
    /// `fair_sem_acquire.lua`).
    FairPermits,
}

impl Kind {
    /// The script's kind argument.
    fn code(self) -> &'static str {
        match self {
            Kind::Semaphore => "s",
            Kind::Read => "r",
            Kind::Write => "w",
            Kind::Fair => "f",
            Kind::Slots => "s",
            Kind::FairPermits => "q",
        }
    }

    /// Whether waiters are served in arrival order across processes.
    pub fn is_fair(self) -> bool {
        matches!(self, Kind::Fair | Kind::FairPermits)
    }
}

impl Permits {
    /// The script's kind argument.
    pub fn kind_code(&self) -> &'static str {
        self.kind.code()
    }
}

/// How a lock's keys are given back, fixed where it is taken and kept in
/// its state (a token taken over from elsewhere, by `adopt` or a release by
/// token, gets the kind the server's keys show: see `Inner::stored_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// A lock: each key a string holding its token (taken by `SET … NX`), so
    /// one key is given back by a compare-and-delete and extended by a
    /// compare-and-set (a server's own commands where it has them).
    Key,
    /// Permits of a semaphore or read-write lock (fair or not, on one node or
    /// as a Redlock semaphore's slots), or a token taken over from elsewhere:
    /// the shared release script deletes the key or the holder's member.
    Plain,
    /// A fair lock: its release hands the key to the next waiter in line.
    Fair,
}

impl LockKind {
    /// The kind of a lock taken as `permits` (`None`: a plain lock).
    pub fn of(permits: Option<Permits>) -> LockKind {
        match permits.map(|p| p.kind) {
            Some(Kind::Fair) => LockKind::Fair,
            Some(_) => LockKind::Plain,
            None => LockKind::Key,
        }
    }
}

/// A fresh token: a UUID, prefixed with the permits it stands for (the
/// semaphore scripts count a holder's permits by it). An attempt at a
/// semaphore on several nodes has `*` where the member each node writes
/// names the slots it granted (`<permits>:<slots>:<uuid>`). The UUID's
/// random bits come from the thread's CSPRNG (ChaCha, seeded and reseeded by
/// the OS): no system call per token.
pub fn token(permits: Option<Permits>) -> Token {
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let id = uuid::Builder::from_random_bytes(rand::random())
        .into_uuid()
        .hyphenated()
        .encode_lower(&mut text);
    match permits {
        Some(p) if p.kind == Kind::Slots => Token::Other(format!("{}:*:{id}", p.permits)),
        Some(p) if p.kind == Kind::Fair => Token::Uuid(text),
        Some(p) => Token::Other(format!("{}:{id}", p.permits)),
        None => Token::Uuid(text),
    }
}

/// A lock's token: one of a UUID's length (nearly every lock's) kept in place, any other
/// (a semaphore's permits, an adopted token) as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Token {
    Uuid([u8; 36]),
    Other(String),
}

impl Token {
    pub fn as_str(&self) -> &str {
        match self {
            // Made only from a `str` of that length (see `From<String>`).
            Token::Uuid(bytes) => std::str::from_utf8(bytes).unwrap_or_default(),
            Token::Other(token) => token,
        }
    }
}

impl std::ops::Deref for Token {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for Token {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// No token yet (nothing allocated).
impl Default for Token {
    fn default() -> Token {
        Token::Other(String::new())
    }
}

impl From<&str> for Token {
    fn from(token: &str) -> Token {
        Token::from(token.to_string())
    }
}

impl From<String> for Token {
    fn from(token: String) -> Token {
        match <[u8; 36]>::try_from(token.as_bytes()) {
            Ok(bytes) => Token::Uuid(bytes),
            Err(_) => Token::Other(token),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::core::model::{fair, fair_permits, rw_permits};

    #[test]
    fn a_uuid_token_is_kept_in_place() {
        let uuid = "0b7e8f5e-7d2c-4c51-9a43-3d4b2f1e6a90".to_string();
        let token = Token::from(uuid.clone());
        assert!(matches!(token, Token::Uuid(_)));
        assert_eq!(&*token, uuid);
        let permits = Token::from(format!("2:{uuid}"));
        assert!(matches!(permits, Token::Other(_)));
        assert_eq!(permits.as_str(), format!("2:{uuid}"));
    }

    /// `permits` of a semaphore of `limit`, of `kind`.
    pub(in crate::core::model) fn sem(limit: u32, permits: u32, kind: Kind) -> Permits {
        Permits {
            limit,
            permits,
            kind,
        }
    }

    #[test]
    fn tokens_carry_their_permits() {
        let t = token(Some(sem(5, 3, Kind::Semaphore)));
        assert!(t.starts_with("3:"));
        assert!(!token(None).contains(':'));
        let slots = token(Some(sem(5, 2, Kind::Slots)));
        assert!(slots.starts_with("2:*:"), "{slots}");
    }

    #[test]
    fn a_plain_token_is_a_bare_uuid() {
        let t = token(None);
        assert_eq!(t.len(), 36);
        assert!(uuid::Uuid::parse_str(&t).is_ok());
        assert_ne!(t, token(None), "every token is fresh");
    }

    #[test]
    fn a_fair_lock_token_is_a_bare_uuid_and_fair_permits_count_theirs() {
        let t = token(Some(fair_permits()));
        assert!(uuid::Uuid::parse_str(&t).is_ok(), "{t}");
        assert!(token(Some(fair(rw_permits(false)))).starts_with("1:"));
    }

    const EVERY_KIND: [Kind; 6] = [
        Kind::Semaphore,
        Kind::Read,
        Kind::Write,
        Kind::Fair,
        Kind::Slots,
        Kind::FairPermits,
    ];

    #[test]
    fn the_lock_kind_comes_from_what_is_taken() {
        assert_eq!(LockKind::of(None), LockKind::Key);
        assert_eq!(LockKind::of(Some(fair_permits())), LockKind::Fair);
        for k in [
            Kind::Semaphore,
            Kind::Read,
            Kind::Write,
            Kind::FairPermits,
            Kind::Slots,
        ] {
            assert_eq!(LockKind::of(Some(sem(3, 1, k))), LockKind::Plain, "{k:?}");
        }
    }

    #[test]
    fn each_kind_has_its_script_code() {
        let codes: Vec<&str> = EVERY_KIND
            .iter()
            .map(|&k| sem(1, 1, k).kind_code())
            .collect();
        assert_eq!(codes, ["s", "r", "w", "f", "s", "q"]);
    }

    #[test]
    fn only_fair_kinds_wait_in_a_line() {
        assert!(Kind::Fair.is_fair() && Kind::FairPermits.is_fair());
        for k in [Kind::Semaphore, Kind::Read, Kind::Write, Kind::Slots] {
            assert!(!k.is_fair(), "{k:?}");
        }
    }

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
}
