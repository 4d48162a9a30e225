//! Semaphores go through the same acquire loop as locks: only the attempt's
//! script differs (a sorted set of holders by lease end instead of `SET NX`),
//! and the token carries the permits it holds (`<permits>:<uuid>`), so the
//! shared renewal and release scripts need nothing else to know about it.
//! On several nodes (Redlock) the permits are numbered slots: each node
//! writes a member naming the slots it granted (`<permits>:<slots>:<uuid>`),
//! the member a quorum granted becomes the holder's token, and the same
//! scripts renew and release it.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use rand::Rng;

use super::Attempt;
use crate::core::broken;
use crate::core::config::AcquireSpec;
use crate::core::error::NodeAnswer;
use crate::core::keys;
use crate::core::lock_state::Answers;
use crate::core::node::SlotReply;
use crate::core::quorum;
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
    /// A counting semaphore on several nodes (Redlock): `limit` numbered slots,
    /// each a mutex a majority of nodes must grant; a holder takes `permits`
    /// distinct slots, all granted by the same majority.
    Slots,
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
            Kind::Slots => "s",
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

/// A fresh token: a UUID, prefixed with the permits it stands for. An
/// attempt at a semaphore on several nodes has `*` where the member each node
/// writes names the slots it granted (`<permits>:<slots>:<uuid>`).
pub(super) fn token(permits: Option<Permits>) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    match permits {
        Some(p) if p.kind == Kind::Slots => format!("{}:*:{id}", p.permits),
        Some(p) if p.kind == Kind::Fair => format!("{}{id}", crate::core::node::FAIR_TOKEN),
        Some(p) => format!("{}:{id}", p.permits),
        None => id,
    }
}

/// Whether `token` is an attempt at a semaphore on several nodes (undone by
/// the attempt's UUID, whatever slots each node granted).
pub fn is_slot_attempt(token: &str) -> bool {
    token
        .split_once(":*:")
        .is_some_and(|(p, _)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// What the nodes' answers to one slot attempt come to.
#[derive(Debug, PartialEq)]
pub(super) struct SlotVerdict {
    /// Each node's answer: `Ok` for a node that granted the most granted
    /// member, `Held` for one that granted other slots or had too few free.
    pub answers: Vec<NodeAnswer>,
    /// The member granted by a quorum: the holder's token.
    pub member: Option<String>,
    /// Nodes that granted other slots than the winning member's (to undo).
    pub stray: Vec<bool>,
}

/// A holder's slots count only where a quorum granted the same member (the
/// same slots): then each of its slots is a mutex held by a majority, and two
/// holders' majorities share a node that never grants one slot twice.
pub(super) fn slot_verdict(replies: &[SlotReply]) -> SlotVerdict {
    let mut votes: Vec<(&str, usize)> = Vec::new();
    for r in replies {
        if let SlotReply::Granted(m) = r {
            match votes.iter_mut().find(|(v, _)| v == m) {
                Some((_, n)) => *n += 1,
                None => votes.push((m, 1)),
            }
        }
    }
    // The most granted member; on a tie the first to be counted.
    let best = votes
        .iter()
        .fold(None::<(&str, usize)>, |b, &(m, n)| match b {
            Some((_, bn)) if bn >= n => b,
            _ => Some((m, n)),
        });
    // (Broken on purpose: once any node granted, every node that answered counts.)
    let minority = best.is_some() && broken::slot_minority();
    let answers = replies
        .iter()
        .map(|r| match r {
            SlotReply::Granted(_) | SlotReply::Busy(_) if minority => NodeAnswer::Ok,
            SlotReply::Granted(m) if best.is_some_and(|(b, _)| b == m) => NodeAnswer::Ok,
            SlotReply::Granted(_) => NodeAnswer::Held { pttl_ms: None },
            SlotReply::Busy(wait) => NodeAnswer::Held { pttl_ms: *wait },
            SlotReply::Failed(answer) => answer.clone(),
        })
        .collect::<Vec<_>>();
    let stray = replies
        .iter()
        .map(|r| matches!(r, SlotReply::Granted(m) if best.is_none_or(|(b, _)| b != m)))
        .collect();
    let granted = answers
        .iter()
        .filter(|a| matches!(a, NodeAnswer::Ok))
        .count();
    let member = best
        .filter(|_| granted >= quorum::needed(replies.len()))
        .map(|(m, _)| m.to_string());
    SlotVerdict {
        answers,
        member,
        stray,
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
        if p.kind == Kind::Slots {
            return self.attempt_slots(key, p, token, spec).await;
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
            stray: Vec::new(),
            member: None,
        }
    }

    /// One attempt at a semaphore on several nodes: every node is asked for
    /// the first free slots from the same random start, and the member (the
    /// slots) a quorum granted becomes the holder's token. Nodes that granted
    /// other slots give them back at once.
    async fn attempt_slots(
        self: &Arc<Self>,
        key: &str,
        p: Permits,
        token: &str,
        spec: &AcquireSpec,
    ) -> Attempt {
        let ttl_ms = ms_of(spec.ttl);
        let timeout = self.cfg.node_timeout_for(spec.ttl);
        // Concurrent attempts start at different slots, so they rarely want the same ones.
        let first = rand::rng().random_range(0..p.limit.max(1));
        let cons = join_all(self.nodes.iter().map(|n| n.connection_within(timeout))).await;
        let sent: Vec<bool> = cons.iter().map(Result::is_ok).collect();
        let started = Instant::now();
        let replies = join_all(self.nodes.iter().zip(cons).map(|(node, con)| async move {
            match con {
                Ok(mut con) => {
                    node.acquire_slots(&mut con, key, token, ttl_ms, p, first, timeout)
                        .await
                }
                Err(answer) => SlotReply::Failed(answer),
            }
        }))
        .await;
        let verdict = slot_verdict(&replies);
        if let Some(member) = &verdict.member {
            // Whatever else this attempt wrote (other slots, a node that did not
            // answer in time) is not the holder's: free it now, not at its lease end.
            let elsewhere: Vec<usize> = (0..replies.len())
                .filter(|&i| {
                    sent[i]
                        && !matches!(&replies[i], SlotReply::Busy(_))
                        && replies[i] != SlotReply::Granted(member.clone())
                })
                .collect();
            if !elsewhere.is_empty() {
                let (inner, key, token, member) = (
                    self.clone(),
                    key.to_string(),
                    token.to_string(),
                    member.clone(),
                );
                self.in_background(async move {
                    join_all(
                        elsewhere
                            .iter()
                            .map(|&i| inner.nodes[i].undo_slots(&key, &token, &member, timeout)),
                    )
                    .await;
                });
            }
        }
        Attempt {
            record: Answers::of(verdict.answers.clone()),
            answers: verdict.answers,
            fence: 0,
            started,
            replicas: None,
            sent,
            stray: verdict.stray,
            member: verdict.member,
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
        let slots = token(Some(Permits {
            limit: 5,
            permits: 2,
            kind: Kind::Slots,
        }));
        assert!(slots.starts_with("2:*:") && is_slot_attempt(&slots));
        assert!(!is_slot_attempt(&t));
        assert!(!is_slot_attempt("2:0-1:uuid"));
        assert!(!is_slot_attempt(":*:uuid"));
    }

    fn granted(m: &str) -> SlotReply {
        SlotReply::Granted(m.to_string())
    }

    #[test]
    fn a_slot_attempt_wins_with_the_member_a_quorum_granted() {
        let v = slot_verdict(&[
            granted("2:0-1:u"),
            granted("2:0-1:u"),
            granted("2:0.2:u"),
            SlotReply::Busy(Some(40)),
            granted("2:0-1:u"),
        ]);
        assert_eq!(v.member.as_deref(), Some("2:0-1:u"));
        assert_eq!(v.stray, [false, false, true, false, false]);
        assert_eq!(v.answers[2], NodeAnswer::Held { pttl_ms: None });
        assert_eq!(v.answers[3], NodeAnswer::Held { pttl_ms: Some(40) });
        assert_eq!(
            v.answers.iter().filter(|a| **a == NodeAnswer::Ok).count(),
            3
        );
    }

    #[test]
    fn slots_granted_by_a_minority_do_not_count() {
        // Three nodes granted something, but no two the same slots.
        let v = slot_verdict(&[
            granted("1:0:u"),
            granted("1:1:u"),
            granted("1:2:u"),
            SlotReply::Failed(NodeAnswer::Timeout),
            SlotReply::Busy(None),
        ]);
        assert_eq!(v.member, None);
        assert_eq!(v.stray, [false, true, true, false, false]);
        let t = quorum::Tally::of(&v.answers);
        assert!(!t.agreed());
        assert!(t.held > 0, "contended: worth waiting for");
        let v = slot_verdict(&[granted("1:0:u"), granted("1:0:u"), SlotReply::Busy(None)]);
        assert_eq!(v.member.as_deref(), Some("1:0:u"));
        let v = slot_verdict(&[
            granted("1:0:u"),
            SlotReply::Failed(NodeAnswer::Timeout),
            SlotReply::Failed(NodeAnswer::Timeout),
        ]);
        assert_eq!(v.member, None);
    }
}
