//! One attempt on every node, whatever the kind (a lock's `SET NX`, a
//! semaphore's or read-write lock's permits, a fair line's place).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use super::fair::attempt_fair;
use super::permits::{attempt_permits, attempt_slots};
use crate::core::broken;
use crate::core::config::AcquireSpec;
use crate::core::error::NodeAnswer;
use crate::core::model::Answers;
use crate::core::model::{Attempt, Kind, Permits};
use crate::core::node::collect::{Call, Collect};
use crate::core::node::Connection;
use crate::core::ops;
use crate::core::quorum;
use crate::core::shared::Inner;
use crate::core::time::ms_of;

/// Every node's connection, before an attempt (instant once connected), so
/// that the validity clock, which starts before the first command is sent,
/// does not pay for a handshake. With several nodes one that cannot connect
/// must not hold up the others: it gets the node timeout (its connect goes on
/// in the background).
pub(super) async fn connect_first(
    inner: &Inner,
    timeout: Duration,
) -> Vec<Result<Connection, NodeAnswer>> {
    join_all(inner.nodes.iter().map(|n| async move {
        if inner.nodes.len() > 1 {
            n.connection_within(timeout).await
        } else {
            n.connection().await
        }
    }))
    .await
}

/// One attempt on every node: a lock's, or a semaphore's when `permits` is set.
pub(super) async fn attempt_for(
    inner: &Arc<Inner>,
    permits: Option<Permits>,
    script_keys: &[String],
    locked: usize,
    token: &str,
    spec: &AcquireSpec,
) -> Attempt {
    let Some(p) = permits else {
        return attempt(inner, script_keys, locked, token, spec).await;
    };
    let key = &script_keys[0];
    if p.kind.is_fair() {
        return attempt_fair(inner, p, key, token, spec).await;
    }
    if p.kind == Kind::Slots {
        return attempt_slots(inner, key, p, token, spec).await;
    }
    attempt_permits(inner, key, p, token, spec).await
}

/// One parallel attempt on every node. `script_keys` holds the `locked`
/// lock keys followed by their fence counters.
async fn attempt(
    inner: &Arc<Inner>,
    script_keys: &[String],
    locked: usize,
    token: &str,
    spec: &AcquireSpec,
) -> Attempt {
    let ttl_ms = ms_of(spec.ttl);
    let timeout = inner.cfg.node_timeout_for(spec.ttl);
    if let (Some(acked), [node]) = (spec.wait_replicas, inner.nodes.as_slice()) {
        // One master with replicas: the write and its WAIT on a connection of their own.
        let started = Instant::now();
        let (answer, fence, replicas) = node
            .acquire_acked(script_keys, locked, token, ttl_ms, timeout, acked)
            .await;
        return Attempt {
            record: Answers::of(vec![answer.clone()]),
            answers: vec![answer],
            fence,
            started,
            replicas,
            sent: vec![true],
            stray: Vec::new(),
            member: None,
        };
    }
    let cons = connect_first(inner, timeout).await;
    let sent = cons.iter().map(Result::is_ok).collect();
    let script_keys: Arc<[String]> = script_keys.into();
    let token: Arc<str> = token.into();
    let started = Instant::now();
    let calls: Vec<Call<i64>> = cons
        .into_iter()
        .enumerate()
        .map(|(i, con)| -> Call<i64> {
            let (inner, keys, token) = (inner.clone(), script_keys.clone(), token.clone());
            Box::pin(async move {
                match con {
                    Ok(mut con) => {
                        inner.nodes[i]
                            .acquire(&mut con, &keys, locked, &token, ttl_ms, timeout)
                            .await
                    }
                    Err(answer) => (answer, 0),
                }
            })
        })
        .collect();
    let record = Answers::default();
    let mut collect = Collect::new(calls, Some(record.clone()));
    // Redlock resolves once a quorum took the lock in time; the other nodes
    // finish in the background (a late grant there is ours to renew and
    // release). Fencing needs the highest value over every granting node,
    // and a failed attempt names every node's answer: both wait for all.
    let drift = inner.cfg.drift_for(spec.ttl);
    let answers = collect
        .until(|g| {
            let elapsed = broken::validity_start(started).elapsed();
            let validity = quorum::validity(spec.ttl, elapsed, drift);
            let (fencing, min) = (inner.cfg.fencing, spec.min_validity);
            ops::acquire::decided(&g.tally(), g.all_in(), fencing, validity, min)
        })
        .await;
    let attempt = Attempt {
        fence: collect.gather().extras().copied().max().unwrap_or(0),
        answers,
        record: record.clone(),
        started,
        replicas: None,
        sent,
        stray: Vec::new(),
        member: None,
    };
    inner.finish_in_background(collect);
    attempt
}
