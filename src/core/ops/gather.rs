//! The answers of one operation sent to every node, as they come in: the
//! outcome is decided on the answers in (often at quorum), and the nodes
//! still out are then recorded late in the lock's record of answers, for
//! the driver to report their faults and to stop tracking the operation
//! once the last one is in. Both drivers feed it: the JS thread's one reply
//! at a time, tokio's through `node::collect`. The answers themselves are
//! kept by [`Replies`].

use crate::core::error::NodeAnswer;
use crate::core::model::Answers;
use crate::core::quorum::{Replies, Tally};

/// One operation's answers so far, and what else each node returned.
pub struct Gather<T> {
    replies: Replies<T>,
    /// Once decided: where late answers go (the record and its operation).
    late: Option<Option<(Answers, u64)>>,
}

/// What an answer did.
#[derive(Debug, PartialEq)]
pub enum Progress {
    /// Not decided yet.
    Waiting,
    /// Decided on these answers (one per node, `Pending` for those out).
    Decided(Vec<NodeAnswer>),
    /// An answer after the outcome, recorded; `fault` is the node's fault to
    /// report, `all_in` whether it was the last one out.
    Late {
        node: usize,
        fault: Option<NodeAnswer>,
        all_in: bool,
    },
}

impl<T> Gather<T> {
    pub fn new(nodes: usize) -> Gather<T> {
        Gather {
            replies: Replies::new(nodes),
            late: None,
        }
    }

    /// Node `i`'s answer; `decided` tells, from the answers in, whether the
    /// outcome is decided now (`record`: where the answers are kept).
    pub fn offer(
        &mut self,
        i: usize,
        answer: NodeAnswer,
        extra: T,
        record: Option<&Answers>,
        decided: impl FnOnce(&Gather<T>) -> bool,
    ) -> Progress {
        if i >= self.replies.nodes() {
            return Progress::Waiting;
        }
        if let Some(late) = &self.late {
            if let Some((record, op)) = late {
                record.late(*op, i, answer.clone());
            }
            let fault = answer.is_fault().then(|| answer.clone());
            self.replies.put(i, answer, extra);
            return Progress::Late {
                node: i,
                fault,
                all_in: self.all_in(),
            };
        }
        self.replies.put(i, answer, extra);
        if !decided(self) {
            return Progress::Waiting;
        }
        let answers = self.answers();
        let op = record.map(|r| (r.clone(), r.start(answers.clone())));
        self.late = Some(op);
        Progress::Decided(answers)
    }

    /// Some node answered with a fault.
    pub fn faulted(&self) -> bool {
        self.replies.faulted()
    }

    pub fn all_in(&self) -> bool {
        self.replies.all_in()
    }

    pub fn is_decided(&self) -> bool {
        self.late.is_some()
    }

    /// The tally of the answers in, counting every node.
    pub fn tally(&self) -> Tally {
        self.replies.tally()
    }

    /// A quorum agreed, or every node answered: how a release and an
    /// extension are decided.
    pub fn at_quorum(&self) -> bool {
        self.tally().agreed() || self.all_in()
    }

    /// One answer per node; [`NodeAnswer::Pending`] for a node still out.
    pub fn answers(&self) -> Vec<NodeAnswer> {
        self.replies.answers()
    }

    /// What else each node that answered returned.
    pub fn extras(&self) -> impl Iterator<Item = &T> {
        self.replies.extras()
    }
}
