//! The Lua scripts, loaded once. Each runs atomically on one node and checks the token.

use std::sync::LazyLock;

use redis::Script;

/// Takes all keys for a token (all or nothing); idempotent for the same token.
pub static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/acquire.lua")));

/// Deletes the keys that still hold the token.
pub static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/release.lua")));

/// Re-arms the TTL of keys that all still hold the token; never recreates a key.
pub static EXTEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/extend.lua")));

/// [`EXTEND`] for many locks in one call, one result per lock.
pub static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/renew.lua")));

/// Takes permits of a semaphore (a sorted set of holders by lease end), all or
/// nothing, reclaiming holders whose lease ended.
pub static SEM_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/sem_acquire.lua")));

/// Counts a semaphore's permits held by unexpired holders (read-only).
pub static SEM_COUNT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/sem_count.lua")));

/// Takes permits of a semaphore on one of several nodes (Redlock) as numbered
/// slots named in the holder's member, all or nothing.
pub static SEM_SLOTS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/sem_slots.lua")));

/// Removes what one attempt at a Redlock semaphore wrote, whatever slots it names.
pub static SEM_UNDO: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/sem_undo.lua")));

/// Takes a lock only when it is free and no live waiter came earlier in the
/// line kept in Redis (leased places, so a departed waiter never wedges it).
pub static FAIR_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fair_acquire.lua")));

/// Takes a semaphore's (or read-write lock's) permits only when they fit
/// together with those of every earlier waiter in the line kept in Redis.
pub static FAIR_SEM_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fair_sem_acquire.lua")));

/// Releases a fair lock by handing it to the first live waiter in line.
pub static FAIR_RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fair_release.lua")));

/// Takes a waiter that stopped waiting out of a fair semaphore's line.
pub static FAIR_LEAVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fair_leave.lua")));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_are_token_checked() {
        for script in [&*RELEASE, &*EXTEND, &*ACQUIRE, &*RENEW] {
            assert_eq!(script.get_hash().len(), 40);
        }
        let extend = include_str!("../scripts/extend.lua");
        assert!(
            !extend.contains("'SET'"),
            "extend must never recreate a key"
        );
        let renew = include_str!("../scripts/renew.lua");
        assert!(!renew.contains("'SET'"), "renew must never recreate a key");
        assert!(renew.contains("~= token"), "renew must check the token");
        let release = include_str!("../scripts/release.lua");
        assert!(
            release.contains("== ARGV[1]"),
            "release must check the token"
        );
    }
}
