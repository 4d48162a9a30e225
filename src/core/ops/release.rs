//! Release: the token-checked delete of a lock's keys on every node,
//! decided once a quorum deleted them (or every node answered).

use super::gather::{counted, Answer};
use super::gather::{Gather, Progress};
use crate::core::error::NodeAnswer;
use crate::core::model::LockKind;
use crate::core::ops::scripts::{self, Call};
use crate::core::quorum::{self, Released, Tally};

/// The release script for `keys` held by `token`; `channel_prefix` names
/// where waiters hear of it ("" for no notice).
pub fn call(keys: &[String], token: &str, channel_prefix: &str) -> Call<'static> {
    let mut call = Call::new(&scripts::RELEASE);
    call.key(keys).arg(token).arg(channel_prefix);
    call
}

/// The release of what `token` holds at `keys`, as a lock of `kind` is
/// given back: a fair lock's hands its key to the next waiter in line
/// (both announce it on `channel_prefix`; empty: no notice). With
/// `longest_ms` (the cleanup of a lock that lapsed), a key is deleted (or
/// handed on) only while its lease has at most that long left.
pub fn call_for(
    kind: LockKind,
    keys: &[String],
    token: &str,
    channel_prefix: &str,
    longest_ms: Option<u64>,
) -> Call<'static> {
    match (kind, keys) {
        (LockKind::Fair, [key]) => {
            let mut c = super::permits::fair_release_call(key, token, channel_prefix, false);
            if let Some(ms) = longest_ms {
                c.arg(ms);
            }
            c
        }
        _ => {
            let mut c = call(keys, token, channel_prefix);
            if let Some(ms) = longest_ms {
                c.arg(ms);
            }
            c
        }
    }
}

/// One node's reply: every key deleted, or not (all) ours any more.
pub fn answer(reply: Answer, keys: usize) -> NodeAnswer {
    counted(reply, keys as i64, "release")
}

/// What the answers the release was decided on mean.
pub fn verdict(answers: &[NodeAnswer]) -> Released {
    quorum::released(&Tally::of(answers))
}

/// A release on every node, its answers so far.
pub struct Release {
    gather: Gather<()>,
    keys: usize,
}

impl Release {
    pub fn new(nodes: usize, keys: usize) -> Release {
        Release {
            gather: Gather::new(nodes),
            keys,
        }
    }

    /// Node `i`'s reply.
    pub fn on_reply(&mut self, i: usize, reply: Answer) -> Progress {
        let answer = answer(reply, self.keys);
        self.gather.offer(i, answer, (), Gather::at_quorum)
    }

    /// Some node answered with a fault.
    pub fn faulted(&self) -> bool {
        self.gather.faulted()
    }
}
