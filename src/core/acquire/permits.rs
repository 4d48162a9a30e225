//! Semaphores go through the same acquire loop as locks: only the attempt's
//! script differs (a sorted set of holders by lease end instead of `SET NX`),
//! and the token carries the permits it holds (`<permits>:<uuid>`), so the
//! shared renewal and release scripts need nothing else to know about it.

use std::time::Instant;

use futures_util::future::join_all;

use super::Attempt;
use crate::core::config::AcquireSpec;
use crate::core::shared::Inner;
use crate::core::time::ms_of;

/// How many permits to take of a semaphore of `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permits {
    pub limit: u32,
    pub permits: u32,
}

/// A fresh token: a UUID, prefixed with the permits it stands for.
pub(super) fn token(permits: Option<Permits>) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    match permits {
        Some(p) => format!("{}:{id}", p.permits),
        None => id,
    }
}

impl Inner {
    /// One attempt on every node: a lock's, or a semaphore's when `permits` is set.
    pub(super) async fn attempt_for(
        &self,
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
                    node.acquire_permits(&mut con, key, token, ttl_ms, p, timeout)
                        .await
                }
                Err(answer) => answer,
            }
        }))
        .await;
        Attempt {
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
        }));
        assert!(t.starts_with("3:"));
        assert!(!token(None).contains(':'));
    }
}
