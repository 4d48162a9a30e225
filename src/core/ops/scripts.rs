//! The Lua scripts, each embedded once (`include_str!` here and nowhere
//! else): its source and its SHA1 (in its [`Script`]); a call of one is a
//! [`Call`](super::call::Call). Each runs atomically on one node and checks
//! the token. EVAL (the source itself) goes out only where a node may not
//! have the script cached: a connection's first call of it, or once after a
//! NOSCRIPT (the transports' recovery, `runtime::ops` and `uvloop::wire`).

use std::sync::LazyLock;

use redis::Script;

/// The source of every script, in the order of `ALL`.
pub mod source {
    pub const ACQUIRE: &str = concat!(
        include_str!("../../scripts/fence.lua"),
        include_str!("../../scripts/acquire.lua")
    );
    pub const RELEASE: &str = include_str!("../../scripts/release.lua");
    pub const EXTEND: &str = include_str!("../../scripts/extend.lua");
    pub const RENEW: &str = include_str!("../../scripts/renew.lua");
    pub const SEM_ACQUIRE: &str = include_str!("../../scripts/sem_acquire.lua");
    pub const SEM_COUNT: &str = include_str!("../../scripts/sem_count.lua");
    pub const SEM_SLOTS: &str = include_str!("../../scripts/sem_slots.lua");
    pub const SEM_UNDO: &str = include_str!("../../scripts/sem_undo.lua");
    pub const FAIR_ACQUIRE: &str = concat!(
        include_str!("../../scripts/fence.lua"),
        include_str!("../../scripts/fair_acquire.lua")
    );
    pub const FAIR_SEM_ACQUIRE: &str = include_str!("../../scripts/fair_sem_acquire.lua");
    pub const FAIR_RELEASE: &str = concat!(
        include_str!("../../scripts/fence.lua"),
        include_str!("../../scripts/fair_release.lua")
    );
    pub const FAIR_LEAVE: &str = include_str!("../../scripts/fair_leave.lua");
}

/// Takes all keys for a token (all or nothing); idempotent for the same token.
pub static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(source::ACQUIRE));

/// Deletes the keys that still hold the token.
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(source::RELEASE));

/// Re-arms the TTL of keys that all still hold the token; never recreates a key.
pub static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(source::EXTEND));

/// [`EXTEND`] for many locks in one call, one result per lock.
pub static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(source::RENEW));

/// Takes permits of a semaphore (a sorted set of holders by lease end), all or
/// nothing, reclaiming holders whose lease ended.
pub static SEM_ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(source::SEM_ACQUIRE));

/// Counts a semaphore's permits held by unexpired holders (read-only).
pub static SEM_COUNT: LazyLock<Script> = LazyLock::new(|| Script::new(source::SEM_COUNT));

/// Takes permits of a semaphore on one of several nodes (Redlock) as numbered
/// slots named in the holder's member, all or nothing.
pub static SEM_SLOTS: LazyLock<Script> = LazyLock::new(|| Script::new(source::SEM_SLOTS));

/// Removes what one attempt at a Redlock semaphore wrote, whatever slots it names.
pub static SEM_UNDO: LazyLock<Script> = LazyLock::new(|| Script::new(source::SEM_UNDO));

/// Takes a lock only when it is free and no live waiter came earlier in the
/// line kept in Redis (leased places, so a departed waiter never wedges it).
pub static FAIR_ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(source::FAIR_ACQUIRE));

/// Takes a semaphore's (or read-write lock's) permits only when they fit
/// together with those of every earlier waiter in the line kept in Redis.
pub static FAIR_SEM_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(source::FAIR_SEM_ACQUIRE));

/// Releases a fair lock by handing it to the first live waiter in line.
pub static FAIR_RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(source::FAIR_RELEASE));

/// Takes a waiter that stopped waiting out of a fair semaphore's line.
pub static FAIR_LEAVE: LazyLock<Script> = LazyLock::new(|| Script::new(source::FAIR_LEAVE));

/// Every script with its source; a script's place here is its bit in a
/// connection's record of the scripts sent on it.
static ALL: [(&LazyLock<Script>, &str); 12] = [
    (&ACQUIRE, source::ACQUIRE),
    (&RELEASE, source::RELEASE),
    (&EXTEND, source::EXTEND),
    (&RENEW, source::RENEW),
    (&SEM_ACQUIRE, source::SEM_ACQUIRE),
    (&SEM_COUNT, source::SEM_COUNT),
    (&SEM_SLOTS, source::SEM_SLOTS),
    (&SEM_UNDO, source::SEM_UNDO),
    (&FAIR_ACQUIRE, source::FAIR_ACQUIRE),
    (&FAIR_SEM_ACQUIRE, source::FAIR_SEM_ACQUIRE),
    (&FAIR_RELEASE, source::FAIR_RELEASE),
    (&FAIR_LEAVE, source::FAIR_LEAVE),
];

/// The source of `script` and its bit (see `ALL`).
pub fn source_of(script: &Script) -> Option<(&'static str, u32)> {
    // The statics themselves first (every call names one), then by hash.
    let at = ALL
        .iter()
        .position(|(s, _)| std::ptr::eq(&***s, script))
        .or_else(|| {
            let hash = script.get_hash();
            ALL.iter().position(|(s, _)| s.get_hash() == hash)
        })?;
    Some((ALL[at].1, 1 << at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ops::call::Call;

    #[test]
    fn scripts_are_token_checked() {
        for script in [&*RELEASE, &*EXTEND, &*ACQUIRE, &*RENEW] {
            assert_eq!(script.get_hash().len(), 40);
        }
        let extend = source::EXTEND;
        assert!(
            !extend.contains("'SET'"),
            "extend must never recreate a key"
        );
        let renew = source::RENEW;
        assert!(!renew.contains("'SET'"), "renew must never recreate a key");
        assert!(renew.contains("~= token"), "renew must check the token");
        for (script, source) in &ALL {
            let hash = Script::new(source).get_hash().to_string();
            assert_eq!(
                script.get_hash(),
                hash,
                "the table pairs each script with its source"
            );
        }
        let mut call = Call::new(&RELEASE);
        call.key("k").arg("t").arg(7);
        let packed = String::from_utf8_lossy(&call.cmd(false).get_packed_command()).to_string();
        assert!(packed.contains(RELEASE.get_hash()) && packed.contains("EVALSHA"));
        let eval = String::from_utf8_lossy(&call.cmd(true).get_packed_command()).to_string();
        assert!(
            eval.starts_with("*6\r\n$4\r\nEVAL\r\n")
                && eval.contains("$1\r\n1\r\n$1\r\nk\r\n$1\r\nt\r\n$1\r\n7\r\n")
        );
        let release = source::RELEASE;
        assert!(
            release.contains("== ARGV[1]"),
            "release must check the token"
        );
    }
}
