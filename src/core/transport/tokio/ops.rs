//! Every operation on one node over tokio, the one place of `Node`'s
//! operation methods (the connection's own are in `mod.rs`): the lock
//! operations' calls and readings come from `core::ops` (written once for
//! both transports) and run here on the node's shared connection; fair
//! locks, permits, replica-acknowledged writes and release notices are the
//! free functions of `fair`, `permits`, `acked` and `notices`. Each is
//! bounded by a timeout.
//!
//! A script goes out as itself (EVAL) the first time on a node's shared
//! connection: that runs it and caches it for the EVALSHAs sent after it on
//! the same connection (a connection runs commands in order), so a fresh or
//! restarted server costs no extra round trip. An EVALSHA answered NOSCRIPT
//! (the cache was flushed, or the server restarted under the connection) ran
//! nothing: it is sent again once as EVAL (`reply::recovering`), one more
//! round trip, each bounded as one command.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::FromRedisValue;

use super::notices::NoticeSink;
use super::reply::{answer_of, bounded, is_noscript, recovering, within};
use super::{acked, notices, permits, renewals, Connection, Node};
use crate::core::broken;
use crate::core::error::NodeAnswer;
use crate::core::model::keys::CHANNEL_PREFIX;
use crate::core::model::{line_keys, LockKind};
use crate::core::ops::call::Call;
use crate::core::ops::scripts;
use crate::core::ops::{self, renew::Renewal, Answer, Reply};

impl Node {
    /// Releases what `token` holds at `keys`, as its `kind` is given back
    /// (with `longest_ms`, only keys whose lease has no more left: see
    /// `ops::release::call_for`).
    pub async fn release(
        &self,
        keys: &[String],
        token: &str,
        kind: LockKind,
        longest_ms: Option<u64>,
        timeout: Duration,
    ) -> NodeAnswer {
        let mut con = match self.connection_within(timeout).await {
            Ok(con) => con,
            Err(answer) => return answer,
        };
        if let Some(del) = broken::release_cmd(keys) {
            return match bounded(
                con.pace().as_ref(),
                timeout,
                del.query_async::<i64>(&mut con),
            )
            .await
            {
                Ok(_) => NodeAnswer::Ok,
                Err(answer) => answer,
            };
        }
        // A cluster would broadcast every notice to all its nodes, and its
        // waiters do not subscribe: no notices there.
        let notices = if self.is_cluster() {
            ""
        } else {
            CHANNEL_PREFIX
        };
        let call = ops::release::call_for(kind, keys, token, notices, longest_ms);
        ops::release::answer(self.run(&mut con, &call, timeout).await, keys.len())
    }

    /// Whether the node answers a PING within `timeout` (connecting first
    /// if need be): `Ok`, or the fault.
    pub async fn ping(&self, timeout: Duration) -> NodeAnswer {
        let mut con = match self.connection_within(timeout).await {
            Ok(con) => con,
            Err(answer) => return answer,
        };
        match bounded(
            None,
            timeout,
            redis::cmd("PING").query_async::<redis::Value>(&mut con),
        )
        .await
        {
            Ok(_) => NodeAnswer::Ok,
            Err(answer) => answer,
        }
    }

    /// Whether `key` has a fair lock's line beside it (a list of waiting
    /// tokens; a fair semaphore's is a sorted set). `false` when the node
    /// cannot tell.
    pub async fn has_fair_line(&self, key: &str, timeout: Duration) -> bool {
        let Ok(mut con) = self.connection_within(timeout).await else {
            return false;
        };
        let mut cmd = redis::cmd("TYPE");
        cmd.arg(&line_keys(key)[0]);
        matches!(bounded(con.pace().as_ref(), timeout, cmd.query_async::<String>(&mut con)).await, Ok(t) if t == "list")
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
        bounded(con.pace().as_ref(), timeout, pipe.query_async(&mut con)).await
    }

    /// Deletes a key whoever holds it (operators only). `Ok` if it existed.
    pub async fn force_delete(&self, key: &str, timeout: Duration) -> NodeAnswer {
        let mut con = match self.connection_within(timeout).await {
            Ok(con) => con,
            Err(answer) => return answer,
        };
        let mut del = redis::cmd("DEL");
        del.arg(key);
        match bounded(
            con.pace().as_ref(),
            timeout,
            del.query_async::<i64>(&mut con),
        )
        .await
        {
            Ok(1) => NodeAnswer::Ok,
            Ok(_) => NodeAnswer::NotHeld,
            Err(answer) => answer,
        }
    }

    /// An acquisition's attempt `call`, then `WAIT` once it took the lock
    /// (`taken` reads its reply), on a connection of their own; with how
    /// many replicas acknowledged (`None` when not taken or WAIT failed).
    pub async fn send_acked(
        &self,
        call: &Call<'_>,
        taken: fn(&Answer) -> bool,
        timeout: Duration,
        acked: (u32, Duration),
    ) -> (Answer, Option<u32>) {
        acked::send_acked(self, call, taken, timeout, acked).await
    }

    /// [`Node::extend_batch`] for one lock, then `WAIT`, on a connection of their own.
    pub async fn extend_acked(
        &self,
        renewal: &Renewal<'_>,
        timeout: Duration,
        acked: (u32, Duration),
    ) -> (NodeAnswer, Option<u32>) {
        acked::extend_acked(self, renewal, timeout, acked).await
    }

    /// The members of a semaphore's holders whose lease has not ended.
    pub async fn permit_holders(
        &self,
        key: &str,
        timeout: Duration,
    ) -> Result<Vec<String>, NodeAnswer> {
        permits::permit_holders(self, key, timeout).await
    }

    /// Permits held (and holders) of a semaphore by unexpired holders.
    pub async fn count_permits(
        &self,
        key: &str,
        timeout: Duration,
    ) -> Result<(u32, u32), NodeAnswer> {
        permits::count_permits(self, key, timeout).await
    }

    /// Subscribes to release notices for `channel`, opening the notice
    /// connection on first use; notices go to `sink`. False when this node
    /// cannot deliver them (the caller then relies on its retry timer).
    pub async fn subscribe(&self, channel: &str, sink: &NoticeSink, timeout: Duration) -> bool {
        notices::subscribe(self, channel, sink, timeout).await
    }

    /// Ends the subscription to `channel` unless `still_wanted()` says a new
    /// waiter came meanwhile (checked under the same lock a subscribe takes).
    pub async fn unsubscribe(
        &self,
        channel: &str,
        still_wanted: impl Fn() -> bool,
        timeout: Duration,
    ) {
        notices::unsubscribe(self, channel, still_wanted, timeout).await
    }

    /// Renews many locks in one round trip (one script call per
    /// `MAX_RENEWAL_KEYS` keys); one answer per renewal.
    pub async fn extend_batch(&self, batch: &[Renewal<'_>], timeout: Duration) -> Vec<NodeAnswer> {
        match self.connection_within(timeout).await {
            Ok(mut con) => renewals::extend_on(&mut con, batch, self.sent(), timeout).await,
            Err(answer) => vec![answer; batch.len()],
        }
    }

    /// Renews one lock on its own (a cluster routes it by its first key), with
    /// the same NOSCRIPT recovery as [`Node::extend_batch`].
    pub async fn extend_one(&self, renewal: &Renewal<'_>, timeout: Duration) -> NodeAnswer {
        match self.connection_within(timeout).await {
            Ok(mut con) => renewals::extend_one_on(&mut con, renewal, self.sent(), timeout).await,
            Err(answer) => answer,
        }
    }

    /// The record of the scripts sent on the shared connection; none for a
    /// cluster, whose nodes each have their own cache.
    pub(super) fn sent(&self) -> Option<&AtomicU32> {
        (!self.is_cluster()).then_some(&self.scripts_sent)
    }

    /// Runs `call` on `con`, the node's shared connection, read as `T`.
    pub(super) async fn invoke<T: FromRedisValue>(
        &self,
        con: &mut Connection,
        call: &Call<'_>,
        timeout: Duration,
    ) -> Result<T, NodeAnswer> {
        let _place = self.window.acquire().await;
        let first = first_time(self.sent(), call.script);
        let con = &*con;
        recovering(
            first,
            |r: &Result<T, NodeAnswer>| matches!(r, Err(a) if is_noscript(a)),
            |eval| {
                let mut con = con.clone();
                let cmd = call.cmd(eval);
                async move {
                    bounded(con.pace().as_ref(), timeout, cmd.query_async::<T>(&mut con)).await
                }
            },
        )
        .await
    }

    /// Sends `call` on the node's shared connection, connecting first (within
    /// `timeout` unless the node is the client's only one); a node it cannot
    /// connect to answers as it failed.
    pub async fn send(&self, call: &Call<'_>, timeout: Duration, alone: bool) -> Answer {
        let con = if alone {
            self.connection().await
        } else {
            self.connection_within(timeout).await
        };
        match con {
            Ok(mut con) => self.run(&mut con, call, timeout).await,
            Err(answer) => Err(answer),
        }
    }

    /// Runs `call` on `con`, the node's shared connection, as an operation reads it.
    pub(super) async fn run(
        &self,
        con: &mut Connection,
        call: &Call<'_>,
        timeout: Duration,
    ) -> Answer {
        let _place = self.window.acquire().await;
        if call.is_plain() {
            return query_plain(con, call, timeout).await;
        }
        let first = first_time(self.sent(), call.script);
        query(con, call, first, timeout).await
    }
}

/// A plain take ([`Call::plain_take`]) on `con`: its SET, and when that
/// answers nil its PTTL, both replies then as one array.
async fn query_plain(con: &Connection, call: &Call<'_>, timeout: Duration) -> Answer {
    let mut con = con.clone();
    let set = call.plain_set();
    let reply = match within(con.pace().as_ref(), timeout, con.req_packed_command(&set)).await {
        Some(result) => answer_of(result)?,
        None => return Err(NodeAnswer::Timeout),
    };
    if reply != Reply::Nil {
        return Ok(reply);
    }
    let pttl = redis::cmd("PTTL").arg(call.keys_first()).to_owned();
    match within(con.pace().as_ref(), timeout, con.req_packed_command(&pttl)).await {
        Some(result) => Ok(Reply::Array(vec![Reply::Nil, answer_of(result)?])),
        None => Err(NodeAnswer::Timeout),
    }
}

/// `call` on `con` (EVAL when `first`, else EVALSHA and EVAL once on NOSCRIPT).
pub(super) async fn query(
    con: &Connection,
    call: &Call<'_>,
    first: bool,
    timeout: Duration,
) -> Answer {
    recovering(
        first,
        |r: &Answer| matches!(r, Ok(Reply::NoScript)),
        |eval| {
            let mut con = con.clone();
            let cmd = call.cmd(eval);
            async move {
                match within(con.pace().as_ref(), timeout, con.req_packed_command(&cmd)).await {
                    Some(result) => answer_of(result),
                    None => Err(NodeAnswer::Timeout),
                }
            }
        },
    )
    .await
}

/// Whether `script` goes out as EVAL now: the first time on a connection
/// that keeps a record (`sent`), which this marks.
pub(super) fn first_time(sent: Option<&AtomicU32>, script: &redis::Script) -> bool {
    let Some((sent, (_, bit))) = sent.zip(scripts::source_of(script)) else {
        return false;
    };
    sent.fetch_or(bit, Ordering::AcqRel) & bit == 0
}
