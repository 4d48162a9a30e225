//! The answers of one operation sent to every node, as they come in: the
//! outcome is decided on the answers in (often at quorum), and the answers
//! of the nodes still out then come back to the caller as late, for the
//! driver to record with the lock ([`LateAnswers`]),
//! to report their faults and to stop tracking the operation once the last
//! one is in. It writes nothing but its own state. Both drivers feed it:
//! the JS thread's one reply at a time, tokio's through `runtime::collect`.
//! Below, the record it leaves: each node's answer to a lock's last
//! operation ([`Answers`]), filled in by the answers that come late.

use std::sync::{Arc, Mutex};

use smallvec::SmallVec;

use crate::core::base;
use crate::core::error::{Fault, NodeAnswer};

use crate::core::quorum::{NodeAnswers, Tally};

/// One operation's answers so far, and what else each node returned.
pub struct Gather<T> {
    /// Each node's answer (and what else it returned) once in.
    replies: SmallVec<[Option<(NodeAnswer, T)>; 1]>,
    decided: bool,
}

/// What an answer did.
#[derive(Debug, PartialEq)]
pub enum Progress {
    /// Not decided yet.
    Waiting,
    /// Decided on these answers (one per node, `Pending` for those out).
    Decided(NodeAnswers),
    /// Node `node`'s answer after the outcome, for the caller to record;
    /// `fault`: the same, when it is a fault to report; `all_in`: whether it
    /// was the last one out.
    Late {
        node: usize,
        answer: NodeAnswer,
        fault: Option<NodeAnswer>,
        all_in: bool,
    },
}

impl<T> Gather<T> {
    pub fn new(nodes: usize) -> Gather<T> {
        Gather {
            replies: (0..nodes).map(|_| None).collect(),
            decided: false,
        }
    }

    /// Node `i`'s answer; `decided` tells, from the answers in, whether the
    /// outcome is decided now.
    pub fn offer(
        &mut self,
        i: usize,
        answer: NodeAnswer,
        extra: T,
        decided: impl FnOnce(&Gather<T>) -> bool,
    ) -> Progress {
        let Some(slot) = self.replies.get_mut(i) else {
            return Progress::Waiting;
        };
        if self.decided {
            let fault = answer.is_fault().then(|| answer.clone());
            *slot = Some((answer.clone(), extra));
            return Progress::Late {
                node: i,
                answer,
                fault,
                all_in: self.all_in(),
            };
        }
        *slot = Some((answer, extra));
        if !decided(self) {
            return Progress::Waiting;
        }
        self.decided = true;
        Progress::Decided(self.answers())
    }

    /// Some node answered with a fault.
    pub fn faulted(&self) -> bool {
        self.replies.iter().flatten().any(|(a, _)| a.is_fault())
    }

    pub fn all_in(&self) -> bool {
        self.replies.iter().all(Option::is_some)
    }

    pub fn is_decided(&self) -> bool {
        self.decided
    }

    /// The tally of the answers in, counting every node.
    pub fn tally(&self) -> Tally {
        let mut t = Tally::of(self.replies.iter().flatten().map(|(a, _)| a));
        t.nodes = self.replies.len();
        t
    }

    /// A quorum agreed, or every node answered: how a release and an
    /// extension are decided.
    pub fn at_quorum(&self) -> bool {
        self.tally().agreed() || self.all_in()
    }

    /// One answer per node; [`NodeAnswer::Pending`] for a node still out.
    pub fn answers(&self) -> NodeAnswers {
        self.replies
            .iter()
            .map(|r| r.as_ref().map_or(NodeAnswer::Pending, |(a, _)| a.clone()))
            .collect()
    }

    /// What else each node that answered returned.
    pub fn extras(&self) -> impl Iterator<Item = &T> {
        self.replies.iter().flatten().map(|(_, x)| x)
    }
}

// A node's reply as every transport hands it to an operation, and the
// decoding shared by the operations.

/// One reply of a node, whatever transport read it.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Int(i64),
    Nil,
    Bulk(Vec<u8>),
    /// A status line (`+OK` without an allocation of its own).
    Status(std::borrow::Cow<'static, str>),
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
        let mut g = base::lock(&self.0);
        g.op += 1;
        if answers.iter().all(|a| matches!(a, NodeAnswer::Ok)) {
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
        let mut g = base::lock(&self.0);
        if g.op == op && i < g.all_ok.max(g.list.len()) {
            if g.all_ok > 0 {
                g.list = vec![NodeAnswer::Ok; std::mem::take(&mut g.all_ok)];
            }
            g.list[i] = answer;
        }
    }

    pub fn get(&self) -> Vec<NodeAnswer> {
        let g = base::lock(&self.0);
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
    fn nodes_still_out_are_pending_and_counted() {
        let mut g: Gather<i64> = Gather::new(3);
        assert_eq!(g.offer(1, NodeAnswer::Ok, 4, |_| false), Progress::Waiting);
        assert_eq!(
            g.answers().as_slice(),
            [NodeAnswer::Pending, NodeAnswer::Ok, NodeAnswer::Pending]
        );
        let t = g.tally();
        assert_eq!((t.nodes, t.ok), (3, 1));
        assert!(!g.all_in() && !g.is_decided());
        assert_eq!(g.extras().copied().collect::<Vec<_>>(), [4]);
    }

    #[test]
    fn a_node_there_is_not_is_ignored_and_answers_after_the_outcome_are_late() {
        let mut g: Gather<()> = Gather::new(2);
        assert_eq!(g.offer(2, NodeAnswer::Ok, (), |_| true), Progress::Waiting);
        assert_eq!(
            g.answers().as_slice(),
            [NodeAnswer::Pending, NodeAnswer::Pending]
        );
        let decided = g.offer(0, NodeAnswer::Ok, (), |g| g.tally().ok == 1);
        assert_eq!(
            decided,
            Progress::Decided([NodeAnswer::Ok, NodeAnswer::Pending].into_iter().collect())
        );
        let late = g.offer(1, NodeAnswer::Timeout, (), |_| {
            unreachable!("decided already")
        });
        assert_eq!(
            late,
            Progress::Late {
                node: 1,
                answer: NodeAnswer::Timeout,
                fault: Some(NodeAnswer::Timeout),
                all_in: true,
            }
        );
        assert!(g.faulted() && g.all_in());
    }

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
