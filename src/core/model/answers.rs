//! Each node's answer to a lock's last operation, kept with the lock.

use std::sync::{Arc, Mutex};

use crate::core::error::NodeAnswer;
use crate::core::sync;

/// Each node's answer to a lock's last operation (acquire, extend, release).
/// A Redlock operation resolves at quorum: the nodes still out read
/// [`NodeAnswer::Pending`] until they answer in the background.
#[derive(Clone, Default)]
pub struct Answers(Arc<Mutex<(u64, Vec<NodeAnswer>)>>);

impl Answers {
    /// The answers of an operation that heard from every node.
    pub fn of(answers: Vec<NodeAnswer>) -> Answers {
        let a = Answers::default();
        a.start(answers);
        a
    }

    /// Records a new operation's answers so far; returns its number.
    pub fn start(&self, answers: Vec<NodeAnswer>) -> u64 {
        let mut g = sync::lock(&self.0);
        g.0 += 1;
        g.1 = answers;
        g.0
    }

    /// A late answer of node `i` to operation `op`; ignored once a later operation started.
    pub fn late(&self, op: u64, i: usize, answer: NodeAnswer) {
        let mut g = sync::lock(&self.0);
        if g.0 == op {
            if let Some(slot) = g.1.get_mut(i) {
                *slot = answer;
            }
        }
    }

    pub fn get(&self) -> Vec<NodeAnswer> {
        sync::lock(&self.0).1.clone()
    }

    /// Records a new operation's answers so far, and where the answers of
    /// its nodes still out go.
    pub fn begin(&self, answers: Vec<NodeAnswer>) -> LateAnswers {
        LateAnswers {
            op: self.start(answers),
            record: self.clone(),
        }
    }
}

/// Where the answers of one operation's nodes that answer after its outcome
/// go: its lock's record, while no later operation of the lock started.
#[derive(Clone)]
pub struct LateAnswers {
    record: Answers,
    op: u64,
}

impl LateAnswers {
    /// Node `i` answered `answer` late.
    pub fn put(&self, i: usize, answer: NodeAnswer) {
        self.record.late(self.op, i, answer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_answers_fill_in_their_own_operation_only() {
        let a = Answers::default();
        let first = a.start(vec![NodeAnswer::Ok, NodeAnswer::Pending]);
        a.late(first, 1, NodeAnswer::Held { pttl_ms: None });
        assert_eq!(a.get()[1].kind(), "held");
        let second = a.start(vec![NodeAnswer::Ok, NodeAnswer::Pending]);
        a.late(first, 1, NodeAnswer::Timeout);
        assert_eq!(
            a.get()[1].kind(),
            "pending",
            "a late answer of an earlier operation"
        );
        a.late(second, 1, NodeAnswer::NotHeld);
        a.late(second, 9, NodeAnswer::Ok);
        assert_eq!(a.get()[1].kind(), "not-held");
    }
}
