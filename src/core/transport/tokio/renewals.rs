//! The watchdog's renewals over tokio: a batch pipelined on one node (per
//! hash slot on a cluster), and one lock's extension on its own. What is
//! sent and how a reply reads come from `ops::renew` and `ops::extend`.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use futures_util::future::join_all;
use redis::Cmd;

use super::ops::{first_time, query};
use super::reply::{answer_of, bounded, recovering};
use super::Connection;
use crate::core::broken;
use crate::core::error::NodeAnswer;
use crate::core::model::keys::key_slot;
use crate::core::model::LockKind;
use crate::core::ops::scripts;
use crate::core::ops::{self, renew::Renewal};

/// A batch of renewals on a given connection, one answer per renewal.
pub(super) async fn extend_on(
    con: &mut Connection,
    batch: &[Renewal<'_>],
    sent: Option<&AtomicU32>,
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
            let con = Connection::Cluster(cluster.clone());
            let answers = extend_pipelined(&con, &group, None, timeout).await;
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
    extend_pipelined(con, batch, sent, timeout).await
}

/// The renewal script over `batch` in one pipeline, sent again once on
/// NOSCRIPT with the script itself in front (nothing ran for those entries).
async fn extend_pipelined(
    con: &Connection,
    batch: &[Renewal<'_>],
    sent: Option<&AtomicU32>,
    timeout: Duration,
) -> Vec<NodeAnswer> {
    let first = first_time(sent, &scripts::RENEW);
    recovering(
        first,
        |answers: &Vec<NodeAnswer>| answers.iter().any(super::reply::is_noscript),
        |eval| renew_pipeline(con, batch, eval, timeout),
    )
    .await
}

/// The renewal script once per chunk, pipelined: one round trip. With
/// `eval` the first chunk carries the script itself (the rest run after it).
async fn renew_pipeline(
    con: &Connection,
    batch: &[Renewal<'_>],
    eval: bool,
    timeout: Duration,
) -> Vec<NodeAnswer> {
    let ranges = ops::renew::chunks(batch);
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for (i, range) in ranges.iter().enumerate() {
        pipe.add_command(renew_cmd(&batch[range.clone()], eval && i == 0));
    }
    let mut con = con.clone();
    match bounded(
        con.pace().as_ref(),
        timeout,
        pipe.query_async::<Vec<redis::RedisResult<redis::Value>>>(&mut con),
    )
    .await
    {
        Ok(replies) if replies.len() == ranges.len() => ranges
            .iter()
            .zip(replies)
            // A NOSCRIPT reads as the node's error reply "NOSCRIPT …".
            .flat_map(|(range, reply)| ops::renew::answers(answer_of(reply), range.len()))
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

/// One call of the renewal script for `locks` (EVAL with `eval`).
fn renew_cmd(locks: &[Renewal<'_>], eval: bool) -> Cmd {
    let call = ops::renew::call(locks);
    match broken::renew_script() {
        Some(source) => call.eval_with(source),
        None => call.cmd(eval),
    }
}

/// The extend script for one lock, sent again once as EVAL on NOSCRIPT.
pub(super) async fn extend_one_on(
    con: &mut Connection,
    renewal: &Renewal<'_>,
    sent: Option<&AtomicU32>,
    timeout: Duration,
) -> NodeAnswer {
    // The script, whatever the lock's kind: this transport sends no other.
    let call = ops::extend::call(LockKind::Plain, renewal.keys, renewal.token, renewal.ttl_ms);
    if let Some(cmd) = broken::extend_cmd() {
        let cmd = call.args_to(cmd);
        let mut con = con.clone();
        let reply = tokio::time::timeout(
            timeout,
            redis::aio::ConnectionLike::req_packed_command(&mut con, &cmd),
        )
        .await;
        return ops::extend::answer(match reply {
            Ok(result) => answer_of(result),
            Err(_) => Err(NodeAnswer::Timeout),
        });
    }
    let first = first_time(sent, &scripts::EXTEND);
    ops::extend::answer(query(con, &call, first, timeout).await)
}
