//! Semaphores go through the same acquire loop as locks: only the attempt's
//! script differs (a sorted set of holders by lease end instead of `SET NX`),
//! and the token carries the permits it holds (see `model/kind.rs`).
//! On several nodes (Redlock) the permits are numbered slots: each node
//! writes a member naming the slots it granted (`<permits>:<slots>:<uuid>`),
//! the member a quorum granted becomes the holder's token, and the same
//! scripts renew and release it.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use rand::Rng;

use super::attempt::connect_first;
use crate::core::config::AcquireSpec;
use crate::core::model::Answers;
use crate::core::model::{writer_key, Attempt, Permits, PermitsLease};
use crate::core::quorum::slots::{slot_verdict, SlotReply};
use crate::core::shared::Inner;
use crate::core::time::ms_of;

/// How long a waiting writer's mark lasts: it outlives the writer's pauses
/// between attempts, not much more; a writer that will not wait leaves none.
pub(crate) fn writer_mark_ms(spec: &AcquireSpec) -> u64 {
    if spec.retry_count == Some(0) || spec.wait_timeout.is_zero() {
        0
    } else {
        ms_of(spec.retry_delay + spec.retry_jitter)
            .saturating_mul(2)
            .max(200)
    }
}

/// One attempt at a semaphore's or read-write lock's permits on every node.
pub(super) async fn attempt_permits(
    inner: &Arc<Inner>,
    key: &str,
    p: Permits,
    token: &str,
    spec: &AcquireSpec,
) -> Attempt {
    let writer = &writer_key(key);
    let mark_ms = writer_mark_ms(spec);
    let ttl_ms = ms_of(spec.ttl);
    let timeout = inner.cfg.node_timeout_for(spec.ttl);
    let cons = connect_first(inner, timeout).await;
    let sent = cons.iter().map(Result::is_ok).collect();
    let started = Instant::now();
    let answers = join_all(inner.nodes.iter().zip(cons).map(|(node, con)| async move {
        match con {
            Ok(mut con) => {
                let lease = PermitsLease {
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
    Attempt::answered(answers, started, sent)
}

/// One attempt at a semaphore on several nodes: every node is asked for
/// the first free slots from the same random start, and the member (the
/// slots) a quorum granted becomes the holder's token. Nodes that granted
/// other slots give them back at once.
pub(super) async fn attempt_slots(
    inner: &Arc<Inner>,
    key: &str,
    p: Permits,
    token: &str,
    spec: &AcquireSpec,
) -> Attempt {
    let ttl_ms = ms_of(spec.ttl);
    let timeout = inner.cfg.node_timeout_for(spec.ttl);
    // Concurrent attempts start at different slots, so they rarely want the same ones.
    let first = rand::rng().random_range(0..p.limit.max(1));
    let cons = join_all(inner.nodes.iter().map(|n| n.connection_within(timeout))).await;
    let sent: Vec<bool> = cons.iter().map(Result::is_ok).collect();
    let started = Instant::now();
    let replies = join_all(inner.nodes.iter().zip(cons).map(|(node, con)| async move {
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
            let (task, key, token, member) = (
                inner.clone(),
                key.to_string(),
                token.to_string(),
                member.clone(),
            );
            inner.in_background(async move {
                join_all(
                    elsewhere
                        .iter()
                        .map(|&i| task.nodes[i].undo_slots(&key, &token, &member, timeout)),
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
