//! The lock operations on one node: the scripts, the batched renewal and its
//! recovery from a flushed script cache (NOSCRIPT), each bounded by a timeout.

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

use futures_util::future::join_all;
use redis::{Cmd, RedisError, Value};

use super::{Connection, Node};
use crate::core::broken;
use crate::core::error::{Fault, NodeAnswer};
use crate::core::keys::{key_slot, CHANNEL_PREFIX};
use crate::core::scripts;

/// Most keys one renewal script touches: Redis runs a script without
/// interruption, so a larger batch is cut into several calls (pipelined).
pub const MAX_RENEWAL_KEYS: usize = 1_000;

/// What one node needs for a renewal inside a batch.
pub struct Renewal<'a> {
    pub keys: &'a [String],
    pub token: &'a str,
    pub ttl_ms: u64,
}

impl Node {
    /// Runs the acquire script. `keys` holds the `locked` lock keys, then their
    /// fence counters (if fencing); on success the answer carries the first key's
    /// fence value (0 without fencing).
    pub async fn acquire(
        &self,
        con: &mut Connection,
        keys: &[String],
        locked: usize,
        token: &str,
        ttl_ms: u64,
        timeout: Duration,
    ) -> (NodeAnswer, i64) {
        let mut invocation = scripts::ACQUIRE.key(keys);
        invocation.arg(token).arg(ttl_ms).arg(locked);
        let call = invocation.invoke_async::<Vec<i64>>(con);
        match bounded(timeout, call).await {
            Ok(reply) => match reply.as_slice() {
                [1, fence, ..] => (NodeAnswer::Ok, *fence),
                [0, pttl, ..] => (
                    NodeAnswer::Held {
                        pttl_ms: u64::try_from(*pttl).ok(),
                    },
                    0,
                ),
                _ => (
                    NodeAnswer::ErrorReply(format!("unexpected acquire reply {reply:?}").into()),
                    0,
                ),
            },
            Err(answer) => (answer, 0),
        }
    }

    pub async fn release(&self, keys: &[String], token: &str, timeout: Duration) -> NodeAnswer {
        if let ([key], true) = (keys, crate::core::acquire::is_slot_attempt(token)) {
            // An attempt at a semaphore on several nodes: its members name slots.
            return self.undo_slots(key, token, "", timeout).await;
        }
        let mut con = match self.connection_within(timeout).await {
            Ok(con) => con,
            Err(answer) => return answer,
        };
        if let Some(del) = broken::release_cmd(keys) {
            return match bounded(timeout, del.query_async::<i64>(&mut con)).await {
                Ok(_) => NodeAnswer::Ok,
                Err(answer) => answer,
            };
        }
        if let ([key], true) = (keys, token.starts_with(super::FAIR_TOKEN)) {
            return self.release_fair(key, token, false, timeout).await;
        }
        let mut invocation = scripts::RELEASE.key(keys);
        // A cluster would broadcast every notice to all its nodes, and its
        // waiters do not subscribe: no notices there.
        let notices = if self.is_cluster() {
            ""
        } else {
            CHANNEL_PREFIX
        };
        invocation.arg(token).arg(notices);
        let call = invocation.invoke_async::<i64>(&mut con);
        match bounded(timeout, call).await {
            Ok(n) if n == keys.len() as i64 => NodeAnswer::Ok,
            Ok(_) => NodeAnswer::NotHeld,
            Err(answer) => answer,
        }
    }

    /// Reads a lock key without changing it: its value, its PTTL and its fence counter.
    pub async fn inspect(
        &self,
        key: &str,
        fence_key: &str,
        timeout: Duration,
    ) -> Result<(Option<String>, i64, Option<i64>), NodeAnswer> {
        let mut con = self.connection_within(timeout).await?;
        let mut pipe = redis::pipe();
        pipe.get(key).pttl(key).get(fence_key);
        bounded(timeout, pipe.query_async(&mut con)).await
    }

    /// Deletes a key whoever holds it (operators only). `Ok` if it existed.
    pub async fn force_delete(&self, key: &str, timeout: Duration) -> NodeAnswer {
        let mut con = match self.connection_within(timeout).await {
            Ok(con) => con,
            Err(answer) => return answer,
        };
        let mut del = redis::cmd("DEL");
        del.arg(key);
        match bounded(timeout, del.query_async::<i64>(&mut con)).await {
            Ok(1) => NodeAnswer::Ok,
            Ok(_) => NodeAnswer::NotHeld,
            Err(answer) => answer,
        }
    }

    /// Renews many locks in one round trip (one script call per
    /// [`MAX_RENEWAL_KEYS`] keys); one answer per renewal.
    pub async fn extend_batch(&self, batch: &[Renewal<'_>], timeout: Duration) -> Vec<NodeAnswer> {
        match self.connection_within(timeout).await {
            Ok(mut con) => extend_on(&mut con, batch, timeout).await,
            Err(answer) => vec![answer; batch.len()],
        }
    }

    /// Renews one lock on its own (a cluster routes it by its first key), with
    /// the same NOSCRIPT recovery as [`Node::extend_batch`].
    pub async fn extend_one(&self, renewal: &Renewal<'_>, timeout: Duration) -> NodeAnswer {
        match self.connection_within(timeout).await {
            Ok(mut con) => extend_one_on(&mut con, renewal, timeout).await,
            Err(answer) => answer,
        }
    }
}

/// [`Node::extend_batch`] on a given connection.
pub(super) async fn extend_on(
    con: &mut Connection,
    batch: &[Renewal<'_>],
    timeout: Duration,
) -> Vec<NodeAnswer> {
    if let Connection::Cluster(cluster) = con {
        // One script cannot span hash slots: one pipelined batch per slot (each
        // lock's keys share one), the slots side by side over the same
        // multiplexed connections.
        let cluster = &*cluster;
        let mut slots: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
        for (i, r) in batch.iter().enumerate() {
            let slot = r.keys.first().map_or(0, |k| key_slot(k));
            slots.entry(slot).or_default().push(i);
        }
        let groups = join_all(slots.into_values().map(|members| async move {
            let group: Vec<Renewal<'_>> = members
                .iter()
                .map(|&i| Renewal {
                    keys: batch[i].keys,
                    token: batch[i].token,
                    ttl_ms: batch[i].ttl_ms,
                })
                .collect();
            let mut con = Connection::Cluster(cluster.clone());
            let answers = extend_pipelined(&mut con, &group, timeout).await;
            (members, answers)
        }))
        .await;
        let mut out = vec![NodeAnswer::Timeout; batch.len()];
        for (members, answers) in groups {
            for (i, answer) in members.into_iter().zip(answers) {
                out[i] = answer;
            }
        }
        return out;
    }
    extend_pipelined(con, batch, timeout).await
}

/// The renewal script over `batch` in one pipeline, reloaded once on NOSCRIPT.
async fn extend_pipelined(
    con: &mut Connection,
    batch: &[Renewal<'_>],
    timeout: Duration,
) -> Vec<NodeAnswer> {
    let hash = scripts::RENEW.get_hash();
    let answers = renew_pipeline(con, batch, hash, timeout).await;
    if !answers.iter().any(is_noscript) {
        return answers;
    }
    // The node lost its script cache (SCRIPT FLUSH or a restart): nothing ran
    // for those entries, so loading the script and sending them again is safe.
    // (SCRIPT LOAD reaches every node of a cluster.)
    let source = include_str!("../../scripts/renew.lua");
    if let Err(answer) = bounded(timeout, load(con, source)).await {
        return vec![answer; batch.len()];
    }
    renew_pipeline(con, batch, hash, timeout).await
}

/// Cuts a batch into runs of whole locks of at most [`MAX_RENEWAL_KEYS`] keys
/// (a lock with more keys than that runs alone).
pub(super) fn chunks(batch: &[Renewal<'_>]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut keys = 0;
    for (i, r) in batch.iter().enumerate() {
        if i > start && keys + r.keys.len() > MAX_RENEWAL_KEYS {
            out.push(start..i);
            start = i;
            keys = 0;
        }
        keys += r.keys.len();
    }
    if start < batch.len() {
        out.push(start..batch.len());
    }
    out
}

/// The renewal script once per chunk, pipelined: one round trip.
async fn renew_pipeline(
    con: &mut Connection,
    batch: &[Renewal<'_>],
    hash: &str,
    timeout: Duration,
) -> Vec<NodeAnswer> {
    let ranges = chunks(batch);
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for range in &ranges {
        pipe.add_command(renew_cmd(&batch[range.clone()], hash));
    }
    match bounded(
        timeout,
        pipe.query_async::<Vec<redis::RedisResult<Value>>>(con),
    )
    .await
    {
        Ok(replies) if replies.len() == ranges.len() => ranges
            .iter()
            .zip(replies)
            .flat_map(|(range, reply)| renew_answers(reply, range.len()))
            .collect(),
        Ok(replies) => vec![
            NodeAnswer::ErrorReply(
                format!("{} replies for {} commands", replies.len(), ranges.len()).into()
            );
            batch.len()
        ],
        Err(answer) => vec![answer; batch.len()],
    }
}

/// One call of the renewal script for `locks`: their keys in order, then the
/// lock count and (key count, token, ttl) per lock.
fn renew_cmd(locks: &[Renewal<'_>], hash: &str) -> Cmd {
    let mut cmd = match broken::renew_script() {
        Some(source) => {
            let mut c = redis::cmd("EVAL");
            c.arg(source);
            c
        }
        None => {
            let mut c = redis::cmd("EVALSHA");
            c.arg(hash);
            c
        }
    };
    cmd.arg(locks.iter().map(|r| r.keys.len()).sum::<usize>());
    for r in locks {
        cmd.arg(r.keys);
    }
    cmd.arg(locks.len());
    for r in locks {
        cmd.arg(r.keys.len()).arg(r.token).arg(r.ttl_ms);
    }
    cmd
}

/// One answer per lock from a renewal script's reply.
fn renew_answers(reply: redis::RedisResult<Value>, locks: usize) -> Vec<NodeAnswer> {
    match reply {
        Ok(Value::Array(items)) if items.len() == locks => items
            .into_iter()
            .map(|item| match item {
                Value::Int(1) => NodeAnswer::Ok,
                Value::Int(0) => NodeAnswer::NotHeld,
                other => NodeAnswer::ErrorReply(format!("the renewal failed ({other:?})").into()),
            })
            .collect(),
        Ok(other) => {
            vec![
                NodeAnswer::ErrorReply(format!("unexpected renewal reply {other:?}").into());
                locks
            ]
        }
        Err(e) => vec![fault(e); locks],
    }
}

/// The extend script for one lock, reloading it once on NOSCRIPT.
async fn extend_one_on(
    con: &mut Connection,
    renewal: &Renewal<'_>,
    timeout: Duration,
) -> NodeAnswer {
    let hash = scripts::EXTEND.get_hash();
    let cmd = extend_cmd(renewal, hash);
    let answer = match bounded(timeout, cmd.query_async::<Value>(con)).await {
        Ok(reply) => extend_answer(Ok(reply)),
        Err(answer) => answer,
    };
    if !is_noscript(&answer) {
        return answer;
    }
    // SCRIPT LOAD reaches every node of a cluster.
    let source = include_str!("../../scripts/extend.lua");
    if let Err(answer) = bounded(timeout, load(con, source)).await {
        return answer;
    }
    match bounded(timeout, cmd.query_async::<Value>(con)).await {
        Ok(reply) => extend_answer(Ok(reply)),
        Err(answer) => answer,
    }
}

async fn load(con: &mut Connection, source: &str) -> redis::RedisResult<String> {
    let mut load = redis::cmd("SCRIPT");
    load.arg("LOAD").arg(source);
    load.query_async::<String>(con).await
}

/// One renewal's EVALSHA of the extend script.
fn extend_cmd(r: &Renewal<'_>, hash: &str) -> Cmd {
    let mut cmd = broken::extend_cmd().unwrap_or_else(|| {
        let mut c = redis::cmd("EVALSHA");
        c.arg(hash);
        c
    });
    cmd.arg(r.keys.len()).arg(r.keys).arg(r.token).arg(r.ttl_ms);
    cmd
}

fn extend_answer(reply: redis::RedisResult<Value>) -> NodeAnswer {
    match reply {
        Ok(Value::Int(1)) => NodeAnswer::Ok,
        Ok(Value::Int(_)) => NodeAnswer::NotHeld,
        Ok(other) => NodeAnswer::ErrorReply(format!("unexpected reply {other:?}").into()),
        Err(e) => fault(e),
    }
}

fn is_noscript(answer: &NodeAnswer) -> bool {
    matches!(answer, NodeAnswer::ErrorReply(m) if m.text().starts_with("NOSCRIPT"))
}

/// Runs one call under a timeout, turning every failure into a [`NodeAnswer`].
pub(super) async fn bounded<T>(
    timeout: Duration,
    call: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, NodeAnswer> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(fault(e)),
        Err(_) => Err(NodeAnswer::Timeout),
    }
}

/// Sorts a redis error into a timeout, an unreachable node or an error reply,
/// keeping the error as the fault's cause.
pub(super) fn fault(e: RedisError) -> NodeAnswer {
    if e.is_timeout() {
        NodeAnswer::Timeout
    } else if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() {
        NodeAnswer::Unreachable(Fault::caused_by(e.to_string(), e))
    } else {
        let text = match e.code() {
            Some(code) => format!("{code} {}", e.detail().unwrap_or_default()),
            None => e.to_string(),
        };
        NodeAnswer::ErrorReply(Fault::caused_by(text, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_cut_into_whole_locks_of_bounded_keys() {
        let keys: Vec<String> = (0..MAX_RENEWAL_KEYS + 1).map(|i| format!("k{i}")).collect();
        let lock = |n: usize| Renewal {
            keys: &keys[..n],
            token: "t",
            ttl_ms: 1,
        };
        assert!(chunks(&[]).is_empty());
        let one = chunks(&[lock(1), lock(2)]);
        assert_eq!((one.len(), one[0].clone()), (1, 0..2));
        let many: Vec<Renewal<'_>> = (0..2 * MAX_RENEWAL_KEYS + 1).map(|_| lock(1)).collect();
        assert_eq!(
            chunks(&many),
            [
                0..MAX_RENEWAL_KEYS,
                MAX_RENEWAL_KEYS..2 * MAX_RENEWAL_KEYS,
                2 * MAX_RENEWAL_KEYS..2 * MAX_RENEWAL_KEYS + 1
            ]
        );
        // A lock never straddles two calls; one larger than the bound goes alone.
        let mixed = [lock(600), lock(600), lock(MAX_RENEWAL_KEYS + 1), lock(1)];
        assert_eq!(chunks(&mixed), [0..1, 1..2, 2..3, 3..4]);
        let fits = [lock(400), lock(600), lock(1)];
        assert_eq!(chunks(&fits), [0..2, 2..3]);
    }
}
