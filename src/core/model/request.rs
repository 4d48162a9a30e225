//! An acquisition as data: the checked [`Request`], what one attempt on every
//! node came back with ([`Attempt`]), and what a won attempt registers
//! ([`Won`]).

use std::time::Instant;

use super::{LockKind, Permits};
use crate::core::config::AcquireSpec;
use crate::core::error::NodeAnswer;
use crate::core::model::Answers;
use crate::core::waiters::Arrival;

/// A checked acquisition, ready to send.
pub struct Request {
    pub(crate) names: Vec<String>,
    pub(crate) spec: AcquireSpec,
    /// Permits of a semaphore rather than a lock.
    pub(crate) permits: Option<Permits>,
    /// The caller's place among this client's callers of the key (a plain
    /// lock on one key): its first attempt goes after theirs were answered.
    pub(crate) arrival: Option<Arrival>,
}

impl Request {
    /// The resolved options.
    pub fn spec(&self) -> &AcquireSpec {
        &self.spec
    }
}

/// What one attempt on every node came back with.
pub(crate) struct Attempt {
    pub answers: Vec<NodeAnswer>,
    /// The same, filled in by nodes answering after the outcome was decided.
    pub record: Answers,
    /// The highest fence value handed out.
    pub fence: i64,
    /// When the first request was sent.
    pub started: Instant,
    /// Replicas that acknowledged (`waitReplicas`).
    pub replicas: Option<u32>,
    /// Whether the script went out to each node (not when its connection failed).
    pub sent: Vec<bool>,
    /// Nodes that answered as contended but wrote (a semaphore on several
    /// nodes: slots other than the quorum's); empty for other attempts.
    pub stray: Vec<bool>,
    /// The token the holder keeps when it differs from the attempt's (a
    /// semaphore on several nodes: the member naming its slots).
    pub member: Option<String>,
}

impl Attempt {
    /// An attempt that heard from every node it was sent to.
    pub(crate) fn answered(answers: Vec<NodeAnswer>, started: Instant, sent: Vec<bool>) -> Attempt {
        Attempt {
            record: Answers::of(answers.clone()),
            answers,
            fence: 0,
            started,
            replicas: None,
            sent,
            stray: Vec::new(),
            member: None,
        }
    }

    /// The nodes whose keys may hold our token: the script went out, and the
    /// node did not answer "held by another" (then it provably wrote nothing).
    pub(crate) fn to_undo(&self) -> Vec<usize> {
        (0..self.answers.len())
            .filter(|&i| {
                self.sent[i]
                    && (self.stray.get(i).copied().unwrap_or(false)
                        || !matches!(self.answers[i], NodeAnswer::Held { .. }))
            })
            .collect()
    }

    /// The token the holder of a won attempt keeps, and its kind, from the
    /// attempt's: a semaphore on several nodes keeps the member naming the
    /// slots a quorum granted, released like any permits.
    pub(crate) fn holder(&self, token: String, kind: LockKind) -> (String, LockKind) {
        match &self.member {
            Some(member) => (member.clone(), LockKind::Plain),
            None => (token, kind),
        }
    }
}

/// What a won attempt registers.
pub(crate) struct Won<'a> {
    pub keys: Vec<String>,
    /// The attempt's token and kind (see [`Attempt::holder`]).
    pub token: String,
    pub kind: LockKind,
    pub attempts: u32,
    pub started: Instant,
    pub spec: &'a AcquireSpec,
    pub attempt: &'a Attempt,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(answers: Vec<NodeAnswer>, sent: Vec<bool>) -> Attempt {
        Attempt::answered(answers, Instant::now(), sent)
    }

    #[test]
    fn a_node_held_by_another_wrote_nothing_to_undo() {
        let a = attempt(
            vec![
                NodeAnswer::Ok,
                NodeAnswer::Held { pttl_ms: Some(5) },
                NodeAnswer::Timeout,
            ],
            vec![true, true, true],
        );
        assert_eq!(a.to_undo(), [0, 2], "a timeout may have written");
    }

    #[test]
    fn a_node_the_script_never_reached_needs_no_undo() {
        let a = attempt(vec![NodeAnswer::Ok, NodeAnswer::Timeout], vec![true, false]);
        assert_eq!(a.to_undo(), [0]);
    }

    #[test]
    fn stray_slots_are_undone_though_the_node_answered_held() {
        let mut a = attempt(
            vec![
                NodeAnswer::Held { pttl_ms: None },
                NodeAnswer::Held { pttl_ms: None },
            ],
            vec![true, true],
        );
        a.stray = vec![true, false];
        assert_eq!(a.to_undo(), [0]);
    }

    #[test]
    fn a_slot_attempts_holder_keeps_its_member_as_a_plain_token() {
        let mut a = attempt(vec![NodeAnswer::Ok], vec![true]);
        let mine = || ("2:*:u".to_string(), LockKind::SlotAttempt);
        assert_eq!(
            a.holder(mine().0, mine().1),
            mine(),
            "no member: as attempted"
        );
        a.member = Some("2:0.3:u".into());
        assert_eq!(
            a.holder(mine().0, mine().1),
            ("2:0.3:u".to_string(), LockKind::Plain)
        );
    }

    #[test]
    fn an_answered_attempt_records_its_answers() {
        let a = attempt(vec![NodeAnswer::Ok], vec![true]);
        assert_eq!(a.record.get(), [NodeAnswer::Ok]);
        assert_eq!((a.fence, a.replicas, a.member), (0, None, None));
        assert!(a.stray.is_empty());
    }
}
