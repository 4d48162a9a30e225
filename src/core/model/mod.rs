//! The data every layer of the lock shares, with no I/O and no awaits: what
//! kind of lock an acquisition takes, the token it carries and the
//! [`LockKind`] a lock keeps in its state (`kind.rs`), the keys and leases
//! one attempt sends to a node (`lease.rs`), the keys and channels of a lock
//! (`keys.rs`); here, each node's answer to a lock's last operation
//! ([`Answers`]). Every other layer builds on it; it builds on none of them.

pub mod keys;
mod kind;
mod lease;

use crate::core::error::NodeAnswer;
use crate::core::sync;
pub use kind::{
    check_permits, fair, fair_permits, rw_permits, token, Kind, LockKind, Permits, Token,
    MAX_LIMIT, READERS,
};
pub use lease::{beside, line_keys, writer_key, FairLease, PermitsLease};
use std::sync::{Arc, Mutex};

// Each node's answer to a lock's last operation, kept with the lock.

/// Each node's answer to a lock's last operation (acquire, extend, release).
/// A Redlock operation resolves at quorum: the nodes still out read
/// [`NodeAnswer::Pending`] until they answer in the background. Kept in
/// the lock's state; its late answers reach it through [`KeepsAnswers`].
#[derive(Default)]
pub struct Answers(Mutex<Record>);

/// What keeps a record of answers (a lock's state), shared with the late
/// answers of its operations.
pub trait KeepsAnswers: Send + Sync {
    fn answers(&self) -> &Answers;
}

impl KeepsAnswers for Answers {
    fn answers(&self) -> &Answers {
        self
    }
}

/// A record of answers, shared.
pub type SharedAnswers = Arc<dyn KeepsAnswers>;

/// One operation's answers as a lock keeps them: "every node said ok" (the
/// answer of nearly every lock held) takes no list of its own.
#[derive(Default)]
struct Record {
    op: u64,
    all_ok: usize,
    list: Vec<NodeAnswer>,
}

impl Answers {
    /// The answers of an operation that heard from every node.
    pub fn of(answers: Vec<NodeAnswer>) -> Answers {
        let a = Answers::default();
        a.start(&answers);
        a
    }

    /// Records a new operation's answers so far; returns its number.
    pub fn start(&self, answers: &[NodeAnswer]) -> u64 {
        let mut g = sync::lock(&self.0);
        g.op += 1;
        if answers.iter().all(|a| *a == NodeAnswer::Ok) {
            g.all_ok = answers.len();
            g.list = Vec::new();
        } else {
            g.all_ok = 0;
            g.list = answers.to_vec();
        }
        g.op
    }

    /// A late answer of node `i` to operation `op`; ignored once a later operation started.
    pub fn late(&self, op: u64, i: usize, answer: NodeAnswer) {
        let mut g = sync::lock(&self.0);
        if g.op == op && i < g.all_ok.max(g.list.len()) {
            if g.all_ok > 0 {
                g.list = vec![NodeAnswer::Ok; std::mem::take(&mut g.all_ok)];
            }
            g.list[i] = answer;
        }
    }

    pub fn get(&self) -> Vec<NodeAnswer> {
        let g = sync::lock(&self.0);
        if g.all_ok > 0 {
            vec![NodeAnswer::Ok; g.all_ok]
        } else {
            g.list.clone()
        }
    }
}

/// Where the answers of one operation's nodes that answer after its outcome
/// go: its lock's record, while no later operation of the lock started.
#[derive(Clone)]
pub struct LateAnswers {
    record: SharedAnswers,
    op: u64,
}

impl LateAnswers {
    /// Records a new operation's answers so far in `record`, and where the
    /// answers of its nodes still out go.
    pub fn begin(record: SharedAnswers, answers: &[NodeAnswer]) -> LateAnswers {
        LateAnswers {
            op: record.answers().start(answers),
            record,
        }
    }

    /// Node `i` answered `answer` late.
    pub fn put(&self, i: usize, answer: NodeAnswer) {
        self.record.answers().late(self.op, i, answer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_answers_fill_in_their_own_operation_only() {
        let a = Answers::default();
        let first = a.start(&[NodeAnswer::Ok, NodeAnswer::Pending]);
        a.late(first, 1, NodeAnswer::Held { pttl_ms: None });
        assert_eq!(a.get()[1].kind(), "held");
        let second = a.start(&[NodeAnswer::Ok, NodeAnswer::Pending]);
        a.late(first, 1, NodeAnswer::Timeout);
        assert_eq!(
            a.get()[1].kind(),
            "pending",
            "a late answer of an earlier operation"
        );
        a.late(second, 1, NodeAnswer::NotHeld);
        a.late(second, 9, NodeAnswer::Ok);
        assert_eq!(a.get()[1].kind(), "not-held");
        // Every node said ok (kept without a list), then one answered late.
        let third = a.start(&[NodeAnswer::Ok, NodeAnswer::Ok]);
        assert_eq!(a.get(), [NodeAnswer::Ok, NodeAnswer::Ok]);
        a.late(third, 1, NodeAnswer::NotHeld);
        a.late(third, 2, NodeAnswer::NotHeld);
        assert_eq!(a.get(), [NodeAnswer::Ok, NodeAnswer::NotHeld]);
    }
}
