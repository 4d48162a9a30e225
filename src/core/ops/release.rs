//! Release: the token-checked delete of a lock's keys on every node,
//! decided once a quorum deleted them (or every node answered).

use super::gather::{counted, Answer, Reply};
use super::gather::{Gather, Progress};
use crate::core::error::NodeAnswer;
use crate::core::model::LockKind;
use crate::core::ops::call::Call;
use crate::core::ops::scripts;
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
        (LockKind::Key, [key]) if longest_ms.is_none() => Call::unlock(key, token, channel_prefix),
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

/// How many clients the release's notice reached on the node that sent
/// `reply`: the script's second number (which it gives only when more than
/// one client heard: 0 here for a plain count), or a script-free unlock's
/// `PUBLISH` reply (0 when no notice went out, or it was refused).
pub fn heard(reply: &Answer) -> i64 {
    match reply {
        Ok(Reply::Array(two)) => match two.as_slice() {
            [Reply::Int(_), Reply::Int(n)] => *n,
            _ => 0,
        },
        _ => 0,
    }
}

/// One node's reply: every key deleted, or not (all) ours any more. The
/// script answers how many keys it deleted and how many clients heard
/// ([`heard`]); a script-free unlock's `DELIFEQ` answers first, its
/// notice's `PUBLISH` second (whose refusal, e.g. no channel rights, does
/// not undo it).
pub fn answer(reply: Answer, keys: usize) -> NodeAnswer {
    let reply = match reply {
        Ok(Reply::Array(mut two)) if two.len() == 2 && matches!(two[0], Reply::Int(_)) => {
            Ok(two.swap_remove(0))
        }
        other => other,
    };
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
    heard: i64,
}

impl Release {
    pub fn new(nodes: usize, keys: usize) -> Release {
        Release {
            gather: Gather::new(nodes),
            keys,
            heard: 0,
        }
    }

    /// Node `i`'s reply.
    pub fn on_reply(&mut self, i: usize, reply: Answer) -> Progress {
        self.heard = self.heard.max(heard(&reply));
        let answer = answer(reply, self.keys);
        self.gather.offer(i, answer, (), Gather::at_quorum)
    }

    /// The most clients the release's notice reached on any node that
    /// answered (see [`heard`]).
    pub fn heard(&self) -> i64 {
        self.heard
    }

    /// Some node answered with a fault.
    pub fn faulted(&self) -> bool {
        self.gather.faulted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::Fault;

    #[test]
    fn a_release_tells_how_many_clients_its_notice_reached() {
        let int = |n| Reply::Int(n);
        // The script: keys deleted, then the most clients a notice reached
        // when more than one did; the count alone otherwise.
        let script = Ok(Reply::Array(vec![int(1), int(3)]));
        assert_eq!(heard(&script), 3);
        assert_eq!(answer(script, 1), NodeAnswer::Ok);
        assert_eq!(heard(&Ok(int(1))), 0);
        assert_eq!(answer(Ok(int(1)), 1), NodeAnswer::Ok);
        // A script-free unlock: DELIFEQ's reply, then PUBLISH's, or its refusal.
        let refused = Ok(Reply::Array(vec![
            int(1),
            Reply::Error(Fault::from("NOPERM no channel")),
        ]));
        assert_eq!(heard(&refused), 0);
        assert_eq!(answer(refused, 1), NodeAnswer::Ok);
        // A fault, a key no longer ours.
        assert_eq!(heard(&Err(NodeAnswer::Timeout)), 0);
        let gone = Ok(Reply::Array(vec![int(0), int(0)]));
        assert_eq!(answer(gone, 1), NodeAnswer::NotHeld);
        let mut op = Release::new(3, 1);
        let _ = op.on_reply(0, Ok(Reply::Array(vec![int(1), int(2)])));
        let _ = op.on_reply(1, Ok(Reply::Array(vec![int(1), int(1)])));
        assert_eq!(op.heard(), 2, "the most any node's notice reached");
    }

    #[test]
    fn only_a_lock_of_one_key_may_go_without_its_script() {
        let one = ["k".to_string()];
        let two = ["a".to_string(), "b".to_string()];
        assert!(call_for(LockKind::Key, &one, "t", "ch:", None)
            .script_free()
            .is_some());
        for (kind, keys, longest) in [
            (LockKind::Key, &two[..], None),
            (LockKind::Key, &one[..], Some(5)),
            (LockKind::Plain, &one[..], None),
            (LockKind::Fair, &one[..], None),
        ] {
            assert!(
                call_for(kind, keys, "t", "ch:", longest)
                    .script_free()
                    .is_none(),
                "{kind:?} {keys:?}"
            );
        }
        // Its script is the shared one, with the same arguments.
        let key = call_for(LockKind::Key, &one, "t", "ch:", None);
        assert_eq!(key.evalsha(), call(&one, "t", "ch:").evalsha());
    }

    #[test]
    fn a_script_free_unlock_is_answered_by_its_delifeq() {
        let error = || Reply::Error(Fault::from("NOPERM no rights to the channel".to_string()));
        let of = |first: Reply, second: Reply| answer(Ok(Reply::Array(vec![first, second])), 1);
        assert_eq!(of(Reply::Int(1), Reply::Int(0)), NodeAnswer::Ok);
        assert_eq!(
            of(Reply::Int(1), error()),
            NodeAnswer::Ok,
            "a refused notice changes nothing"
        );
        assert_eq!(of(Reply::Int(0), Reply::Int(3)), NodeAnswer::NotHeld);
        assert_eq!(answer(Ok(Reply::Int(1)), 1), NodeAnswer::Ok);
        assert!(!matches!(
            of(error(), Reply::Int(0)),
            NodeAnswer::Ok | NodeAnswer::NotHeld
        ));
    }
}
