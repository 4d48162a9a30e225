//! A node's reply as every transport hands it to an operation, and the
//! decoding shared by the operations.

use crate::core::error::{Fault, NodeAnswer};

/// One reply of a node, whatever transport read it.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Int(i64),
    Nil,
    Bulk(Vec<u8>),
    Status(String),
    Array(Vec<Reply>),
    /// An error reply, worded `CODE detail`.
    Error(Fault),
    /// The node does not have the script: nothing ran.
    NoScript,
}

/// A reply, or the fault that kept it from coming (timeout, cut, refusal).
pub type Answer = Result<Reply, NodeAnswer>;

/// What a node says when it has not got the script.
pub const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

impl Reply {
    /// An error reply from its code and detail; NOSCRIPT is a kind of its own.
    pub fn error(code: &str, detail: &str) -> Reply {
        if code == "NOSCRIPT" {
            Reply::NoScript
        } else {
            Reply::Error(format!("{code} {detail}").into())
        }
    }

    /// An array of integers, as most scripts answer.
    pub fn ints(&self) -> Option<Vec<i64>> {
        match self {
            Reply::Array(items) => items
                .iter()
                .map(|v| match v {
                    Reply::Int(n) => Some(*n),
                    _ => None,
                })
                .collect(),
            _ => None,
        }
    }
}

/// The node's answer for a reply an operation has no meaning for: an error
/// reply is the node's error, anything else an unexpected `what` reply.
pub fn unexpected(reply: Reply, what: &str) -> NodeAnswer {
    match reply {
        Reply::Error(fault) => NodeAnswer::ErrorReply(fault),
        Reply::NoScript => NodeAnswer::ErrorReply(NOSCRIPT.into()),
        other => NodeAnswer::ErrorReply(format!("unexpected {what} reply {other:?}").into()),
    }
}

/// A reply of 1 for yes and 0 for no (or any other integer): the extend and
/// release scripts' answer, `yes` being the count that means done.
pub fn counted(reply: Answer, yes: i64, what: &str) -> NodeAnswer {
    match reply {
        Ok(Reply::Int(n)) if n == yes => NodeAnswer::Ok,
        Ok(Reply::Int(_)) => NodeAnswer::NotHeld,
        Ok(other) => unexpected(other, what),
        Err(answer) => answer,
    }
}
