//! The tokio transport's side of a reply: a redis-rs result turned into the
//! operations' [`Reply`] or the node's fault, every call bounded by a
//! timeout, and the one NOSCRIPT recovery of this transport.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{RedisError, RedisResult, Value};

use crate::core::base::{from_us, later, to_us};
use crate::core::error::{Fault, NodeAnswer};
use crate::core::ops::{Answer, Reply};

/// A redis-rs result as an operation reads it: error replies are replies
/// (their redis error kept as the cause), the rest of the errors faults.
pub fn answer_of(result: RedisResult<Value>) -> Answer {
    match result {
        Ok(value) => Ok(reply_of(value)),
        Err(e) => as_reply(fault(e)),
    }
}

/// A value read by redis-rs as the operations' reply.
pub fn reply_of(value: Value) -> Reply {
    match value {
        Value::Int(n) => Reply::Int(n),
        Value::Nil => Reply::Nil,
        Value::BulkString(b) => Reply::Bulk(b),
        Value::SimpleString(s) => Reply::Status(s.into()),
        Value::Okay => Reply::Status("OK".into()),
        Value::Boolean(b) => Reply::Int(i64::from(b)),
        Value::Array(items) | Value::Set(items) | Value::Push { data: items, .. } => {
            Reply::Array(items.into_iter().map(reply_of).collect())
        }
        Value::Map(pairs) => Reply::Array(
            pairs
                .into_iter()
                .flat_map(|(k, v)| [reply_of(k), reply_of(v)])
                .collect(),
        ),
        Value::ServerError(e) => match as_reply(fault(e.into())) {
            Ok(reply) => reply,
            Err(answer) => Reply::Error(answer.to_string().into()),
        },
        other => Reply::Status(format!("{other:?}").into()),
    }
}

/// An error reply of the node as a reply; any other fault as it is.
fn as_reply(answer: NodeAnswer) -> Answer {
    match answer {
        NodeAnswer::ErrorReply(f) if f.text().starts_with("NOSCRIPT") => Ok(Reply::NoScript),
        NodeAnswer::ErrorReply(f) => Ok(Reply::Error(f)),
        other => Err(other),
    }
}

/// Whether a node answered that it has not got the script.
pub fn is_noscript(answer: &NodeAnswer) -> bool {
    matches!(answer, NodeAnswer::ErrorReply(m) if m.text().starts_with("NOSCRIPT"))
}

/// The transport's NOSCRIPT recovery, for every script call on tokio: sent
/// as EVAL (`send(true)`) when `first`, else as EVALSHA and, if that found
/// no script (nothing ran), sent again once as EVAL: one more round trip.
pub async fn recovering<T, Fut: Future<Output = T>>(
    first: bool,
    noscript: impl Fn(&T) -> bool,
    send: impl Fn(bool) -> Fut,
) -> T {
    let out = send(first).await;
    if first || !noscript(&out) {
        return out;
    }
    send(true).await
}

/// Runs one call under a timeout (see [`within`]), turning every failure
/// into a [`NodeAnswer`].
pub async fn bounded<T>(
    pace: Option<&Pace>,
    timeout: Duration,
    call: impl Future<Output = RedisResult<T>>,
) -> Result<T, NodeAnswer> {
    match within(pace, timeout, call).await {
        Some(out) => out.map_err(fault),
        None => Err(NodeAnswer::Timeout),
    }
}

/// When one connection (a socket whose replies come in order) last
/// answered anything, as µs (see [`to_us`]).
#[derive(Clone, Default)]
pub struct Pace(Arc<AtomicU64>);

/// `call` under `timeout` (`None`: timed out). Sent on a connection with a
/// [`Pace`], the bound runs from that connection's last reply: replies
/// come in order, so while the replies of the commands ahead of it keep
/// coming, it waits behind them (a burst of the client's own, or a runtime
/// busy with one, is not a server failure), and a connection quiet for
/// `timeout` times it out. Without one (a cluster's commands go to several
/// sockets) it has `timeout` from now.
pub async fn within<F: Future>(
    pace: Option<&Pace>,
    timeout: Duration,
    call: F,
) -> Option<F::Output> {
    let Some(pace) = pace else {
        return tokio::time::timeout(timeout, call).await.ok();
    };
    tokio::pin!(call);
    let mut deadline = later(Instant::now(), timeout);
    loop {
        if let Ok(out) = tokio::time::timeout_at(deadline.into(), &mut call).await {
            pace.0.fetch_max(to_us(Instant::now()), Ordering::Relaxed);
            return Some(out);
        }
        let behind = later(from_us(pace.0.load(Ordering::Relaxed)), timeout);
        if behind <= deadline {
            return None;
        }
        deadline = behind;
    }
}

/// Sorts a redis error into a timeout, an unreachable node or an error reply,
/// keeping the error as the fault's cause.
pub fn fault(e: RedisError) -> NodeAnswer {
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

    const BOUND: Duration = Duration::from_millis(60);

    #[tokio::test]
    async fn a_command_behind_replies_that_keep_coming_waits_for_its_own() {
        let pace = Pace::default();
        // The replies ahead of it come every half bound, for four bounds.
        let ahead = {
            let pace = pace.clone();
            async move {
                for _ in 0..8 {
                    tokio::time::sleep(BOUND / 2).await;
                    within(Some(&pace), BOUND, async {}).await;
                }
            }
        };
        let ours = within(Some(&pace), BOUND, tokio::time::sleep(BOUND * 4));
        let (out, ()) = tokio::join!(ours, ahead);
        assert!(
            out.is_some(),
            "timed out although the connection kept answering"
        );
    }

    #[tokio::test]
    async fn a_quiet_connection_times_its_command_out_within_its_bound() {
        let pace = Pace::default();
        within(Some(&pace), BOUND, async {}).await;
        let started = Instant::now();
        let out = within(Some(&pace), BOUND, std::future::pending::<()>()).await;
        assert!(out.is_none());
        let waited = started.elapsed();
        assert!(
            waited >= BOUND && waited < Duration::from_secs(1),
            "{waited:?}"
        );
        // Without a pace the bound runs from the call.
        assert!(within(None, BOUND, std::future::pending::<()>())
            .await
            .is_none());
    }
}
