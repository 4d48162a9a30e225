//! The Lua scripts, each embedded once (`include_str!` here and nowhere
//! else): its source, its SHA1 (in its [`Script`]) and, per call, the packed
//! EVALSHA both transports write. Each runs atomically on one node and checks
//! the token. EVAL (the source itself) goes out only where a node may not
//! have the script cached: a connection's first call of it, or once after a
//! NOSCRIPT (the transports' recovery, `runtime::ops` and `uvloop::wire`).

use std::sync::LazyLock;

use redis::Script;

/// The source of every script, in the order of [`ALL`].
pub mod source {
    pub const ACQUIRE: &str = include_str!("../scripts/acquire.lua");
    pub const RELEASE: &str = include_str!("../scripts/release.lua");
    pub const EXTEND: &str = include_str!("../scripts/extend.lua");
    pub const RENEW: &str = include_str!("../scripts/renew.lua");
    pub const SEM_ACQUIRE: &str = include_str!("../scripts/sem_acquire.lua");
    pub const SEM_COUNT: &str = include_str!("../scripts/sem_count.lua");
    pub const SEM_SLOTS: &str = include_str!("../scripts/sem_slots.lua");
    pub const SEM_UNDO: &str = include_str!("../scripts/sem_undo.lua");
    pub const FAIR_ACQUIRE: &str = include_str!("../scripts/fair_acquire.lua");
    pub const FAIR_SEM_ACQUIRE: &str = include_str!("../scripts/fair_sem_acquire.lua");
    pub const FAIR_RELEASE: &str = include_str!("../scripts/fair_release.lua");
    pub const FAIR_LEAVE: &str = include_str!("../scripts/fair_leave.lua");
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

/// The source of `script` and its bit (see [`ALL`]).
pub fn source_of(script: &Script) -> Option<(&'static str, u32)> {
    let hash = script.get_hash();
    ALL.iter()
        .enumerate()
        .find(|(_, (s, _))| s.get_hash() == hash)
        .map(|(i, (_, source))| (*source, 1 << i))
}

/// One call of a script: its keys and arguments, sent as EVALSHA or EVAL.
/// Both transports write it: tokio as a [`redis::Cmd`] ([`Call::cmd`]), the
/// fast path as the bytes of [`Call::evalsha`].
#[derive(Debug, Clone)]
pub struct Call<'s> {
    pub script: &'s Script,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl<'s> Call<'s> {
    pub fn new(script: &'s Script) -> Call<'s> {
        Call {
            script,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    pub fn key<T: redis::ToRedisArgs>(&mut self, key: T) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    pub fn arg<T: redis::ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// Its arguments as text (for tests).
    #[cfg(test)]
    pub fn args_text(&self) -> Vec<String> {
        let text = |a: &Vec<u8>| String::from_utf8_lossy(a).into_owned();
        self.args.iter().map(text).collect()
    }

    /// The script's source, for the EVAL sent where a node may not have it.
    pub fn source(&self) -> Option<&'static str> {
        source_of(self.script).map(|(source, _)| source)
    }

    /// EVALSHA, or EVAL with the script's source (`eval`; EVAL also caches
    /// the script on the server for the EVALSHAs after it).
    pub fn cmd(&self, eval: bool) -> redis::Cmd {
        match (eval, self.source()) {
            (true, Some(source)) => self.eval_with(source),
            _ => {
                let mut c = redis::cmd("EVALSHA");
                c.arg(self.script.get_hash());
                self.args_to(c)
            }
        }
    }

    /// The same keys and arguments for another script's `source`, as EVAL.
    pub fn eval_with(&self, source: &str) -> redis::Cmd {
        let mut c = redis::cmd("EVAL");
        c.arg(source);
        self.args_to(c)
    }

    /// `cmd` (EVAL or EVALSHA and its script) followed by this call's key
    /// count, keys and arguments.
    pub fn args_to(&self, mut cmd: redis::Cmd) -> redis::Cmd {
        cmd.arg(self.keys.len());
        for k in &self.keys {
            cmd.arg(k.as_slice());
        }
        for a in &self.args {
            cmd.arg(a.as_slice());
        }
        cmd
    }

    /// The packed EVALSHA, as written on a socket.
    pub fn evalsha(&self) -> Vec<u8> {
        self.cmd(false).get_packed_command()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
