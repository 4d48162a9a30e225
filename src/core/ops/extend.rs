//! Extend: re-arming one lock's keys on every node (same token, never a
//! key that is gone), decided once a quorum re-armed them (or every node
//! answered); the verdict weighs the new deadline against `now`.

use std::time::{Duration, Instant};

use super::gather::{counted, Answer, Reply};
use super::gather::{Gather, Progress};
use crate::core::base::later;
use crate::core::error::NodeAnswer;
use crate::core::model::LockKind;
use crate::core::ops::call::Call;
use crate::core::ops::scripts;
use crate::core::quorum::{self, Renewed, Tally};

/// The extend script for `keys` held by `token` (a lock of `kind`), to a
/// lease of `ttl_ms`; a lock of one key may go without it
/// ([`Call::prolong`]).
pub fn call(kind: LockKind, keys: &[String], token: &str, ttl_ms: u64) -> Call<'static> {
    if let (LockKind::Key, [key]) = (kind, keys) {
        return Call::prolong(key, token, ttl_ms);
    }
    let mut call = Call::new(&scripts::EXTEND);
    call.key(keys).arg(token).arg(ttl_ms);
    call
}

/// One node's reply: re-armed, or the keys are not (all) ours any more
/// (a script-free `SET … IFEQ` answers OK, or nil).
pub fn answer(reply: Answer) -> NodeAnswer {
    let reply = match reply {
        Ok(Reply::Status(s)) if s == "OK" => Ok(Reply::Int(1)),
        Ok(Reply::Nil) => Ok(Reply::Int(0)),
        other => other,
    };
    counted(reply, 1, "extend")
}

/// What a renewal's or extension's answers mean at `now`, for a lease of
/// `ttl` sent at `started` with a clock-drift allowance of `drift`, and the
/// lease's new deadline (start + ttl − drift).
pub fn verdict(
    answers: &[NodeAnswer],
    started: Instant,
    ttl: Duration,
    drift: Duration,
    now: Instant,
) -> (Renewed, Instant) {
    let deadline = later(started, ttl.saturating_sub(drift));
    (
        quorum::renewed(&Tally::of(answers), deadline > now),
        deadline,
    )
}

/// An extension on every node, its answers so far.
pub struct Extend {
    gather: Gather<()>,
}

impl Extend {
    pub fn new(nodes: usize) -> Extend {
        Extend {
            gather: Gather::new(nodes),
        }
    }

    /// Node `i`'s reply.
    pub fn on_reply(&mut self, i: usize, reply: Answer) -> Progress {
        let answer = answer(reply);
        self.gather.offer(i, answer, (), Gather::at_quorum)
    }

    /// Some node answered with a fault.
    pub fn faulted(&self) -> bool {
        self.gather.faulted()
    }
}

#[cfg(test)]
mod answer_tests {
    use super::*;

    #[test]
    fn a_set_ifeq_answers_as_the_script_does() {
        assert_eq!(answer(Ok(Reply::Status("OK".into()))), NodeAnswer::Ok);
        assert_eq!(answer(Ok(Reply::Nil)), NodeAnswer::NotHeld);
        assert_eq!(answer(Ok(Reply::Int(1))), NodeAnswer::Ok);
        assert_eq!(answer(Ok(Reply::Int(0))), NodeAnswer::NotHeld);
        assert!(call(LockKind::Key, &["k".into()], "t", 5)
            .script_free()
            .is_some());
        assert!(call(LockKind::Key, &["a".into(), "b".into()], "t", 5)
            .script_free()
            .is_none());
        assert!(call(LockKind::Plain, &["k".into()], "t", 5)
            .script_free()
            .is_none());
    }
}
