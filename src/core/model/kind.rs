//! What an acquisition takes: a plain lock (no permits), or permits of a
//! semaphore, a read-write lock or a fair line, and the token that says so.
//! The [`LockKind`] decided here is kept in the lock's state: this process
//! never parses its own tokens to know how to give a lock back.
//! The token carries the permits it holds (`<permits>:<uuid>`), so the shared
//! renewal and release scripts need nothing else to know about it.

use crate::core::error::{LockError, Result};

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

/// The largest `limit` accepted: every acquisition counts the holders.
pub const MAX_LIMIT: u32 = 100_000;

/// How many readers a read-write lock admits at once; its writer takes them all.
pub const READERS: u32 = 10_000;

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
mod tests {
    use super::*;
    use crate::core::error::ErrorCode;

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

    fn sem(limit: u32, permits: u32, kind: Kind) -> Permits {
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
