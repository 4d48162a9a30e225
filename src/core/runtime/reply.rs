//! The tokio transport's side of a reply: a redis-rs result turned into the
//! operations' [`Reply`] or the node's fault, every call bounded by a
//! timeout, and the one NOSCRIPT recovery of this transport.

use std::future::Future;

use redis::{RedisError, RedisResult, Value};

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
        Value::SimpleString(s) => Reply::Status(s),
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
        other => Reply::Status(format!("{other:?}")),
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

/// Runs one call under a timeout, turning every failure into a [`NodeAnswer`].
pub async fn bounded<T>(
    timeout: std::time::Duration,
    call: impl Future<Output = RedisResult<T>>,
) -> Result<T, NodeAnswer> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(fault(e)),
        Err(_) => Err(NodeAnswer::Timeout),
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
