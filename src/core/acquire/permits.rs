//! Semaphores go through the same acquire loop as locks: only the attempt's
//! script differs (a sorted set of holders by lease end instead of `SET NX`),
//! and the token carries the permits it holds (`<permits>:<uuid>`), so the
//! shared renewal and release scripts need nothing else to know about it.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;

use super::Attempt;
use crate::core::config::AcquireSpec;
use crate::core::keys;
use crate::core::lock_state::Answers;
use crate::core::shared::Inner;
use crate::core::time::ms_of;

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
    /// A semaphore's or read-write lock's permits served in arrival order
    /// across processes (see `acquire/fair.rs`).
    FairPermits,
}

impl Kind {
    fn code(self) -> &'static str {
        match self {
            Kind::Semaphore => "s",
            Kind::Read => "r",
            Kind::Write => "w",
            Kind::Fair => "f",
            Kind::FairPermits => "q",
        }
    }
}

/// The key a waiting writer marks itself in, in the same hash slot as `key`.
pub fn writer_key(key: &str) -> String {
    beside(key, "writer")
}

/// A companion key of `key` in its hash slot: `{key}:<what>` (or `key:<what>`
/// for a key with a hash tag).
pub fn beside(key: &str, what: &str) -> String {
    let fence = keys::fence_key(key);
    format!("{}:{what}", fence.trim_end_matches(":fence"))
}

/// A fresh token: a UUID, prefixed with the permits it stands for.
pub(super) fn token(permits: Option<Permits>) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    match permits {
        Some(p) if p.kind == Kind::Fair => format!("{}{id}", crate::core::node::FAIR_TOKEN),
        Some(p) => format!("{}:{id}", p.permits),
        None => id,
    }
}

/// One attempt's keys and leases on a node.
pub struct Lease<'a> {
    pub key: &'a str,
    /// Where a waiting writer marks itself (read-write locks).
    pub writer: &'a str,
    pub token: &'a str,
    pub ttl_ms: u64,
    /// How long a waiting writer's mark lives.
    pub mark_ms: u64,
}

impl Permits {
    /// The script's kind argument.
    pub fn kind_code(&self) -> &'static str {
        self.kind.code()
    }
}

impl Inner {
    /// One attempt on every node: a lock's, or a semaphore's when `permits` is set.
    pub(super) async fn attempt_for(
        self: &Arc<Self>,
        permits: Option<Permits>,
        script_keys: &[String],
        locked: usize,
        token: &str,
        spec: &AcquireSpec,
    ) -> Attempt {
        let Some(p) = permits else {
            return self.attempt(script_keys, locked, token, spec).await;
        };
        let key = &script_keys[0];
        if matches!(p.kind, Kind::Fair | Kind::FairPermits) {
            return self.attempt_fair(p, key, token, spec).await;
        }
        let writer = &writer_key(key);
        // A waiting writer's mark outlives its pauses between attempts, not much
        // more; a writer that will not wait leaves none.
        let mark_ms = if spec.retry_count == Some(0) || spec.wait_timeout.is_zero() {
            0
        } else {
            ms_of(spec.retry_delay + spec.retry_jitter)
                .saturating_mul(2)
                .max(200)
        };
        let ttl_ms = ms_of(spec.ttl);
        let timeout = self.cfg.node_timeout_for(spec.ttl);
        // As for locks: connect first, so the validity clock does not pay for a handshake.
        let cons = join_all(self.nodes.iter().map(|n| async move {
            if self.nodes.len() > 1 {
                n.connection_within(timeout).await
            } else {
                n.connection().await
            }
        }))
        .await;
        let sent = cons.iter().map(Result::is_ok).collect();
        let started = Instant::now();
        let answers = join_all(self.nodes.iter().zip(cons).map(|(node, con)| async move {
            match con {
                Ok(mut con) => {
                    let lease = Lease {
                        key,
                        writer,
                        token,
                        ttl_ms,
                        mark_ms,
                    };
                    node.acquire_permits(&mut con, &lease, p, timeout).await
                }
                Err(answer) => answer,
            }
        }))
        .await;
        Attempt {
            record: Answers::of(answers.clone()),
            answers,
            fence: 0,
            started,
            replicas: None,
            sent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_carry_their_permits() {
        let t = token(Some(Permits {
            limit: 5,
            permits: 3,
            kind: Kind::Semaphore,
        }));
        assert_eq!(writer_key("a"), "{a}:writer");
        assert_eq!(writer_key("{t}a"), "{t}a:writer");
        assert!(t.starts_with("3:"));
        assert!(!token(None).contains(':'));
    }
}
