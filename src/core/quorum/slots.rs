//! The verdict on one attempt at a semaphore on several nodes: which member
//! (which slots) a quorum granted, what each node's reply counts as, and
//! which nodes wrote slots that are not the holder's.

use super::needed;
use crate::core::broken;
use crate::core::error::NodeAnswer;

/// One node's answer to an attempt at a semaphore on several nodes.
#[derive(Debug, Clone, PartialEq)]
pub enum SlotReply {
    /// The node granted the permits as the slots named in this member.
    Granted(String),
    /// Too few slots were free: nothing written (ms until the earliest lease ends).
    Busy(Option<u64>),
    /// No usable answer.
    Failed(NodeAnswer),
}

/// What the nodes' answers to one slot attempt come to.
#[derive(Debug, PartialEq)]
pub struct SlotVerdict {
    /// Each node's answer: `Ok` for a node that granted the most granted
    /// member, `Held` for one that granted other slots or had too few free.
    pub answers: Vec<NodeAnswer>,
    /// The member granted by a quorum: the holder's token.
    pub member: Option<String>,
    /// Nodes that granted other slots than the winning member's (to undo).
    pub stray: Vec<bool>,
}

/// A holder's slots count only where a quorum granted the same member (the
/// same slots): then each of its slots is a mutex held by a majority, and two
/// holders' majorities share a node that never grants one slot twice.
pub fn slot_verdict(replies: &[SlotReply]) -> SlotVerdict {
    let mut votes: Vec<(&str, usize)> = Vec::new();
    for r in replies {
        if let SlotReply::Granted(m) = r {
            match votes.iter_mut().find(|(v, _)| v == m) {
                Some((_, n)) => *n += 1,
                None => votes.push((m, 1)),
            }
        }
    }
    // The most granted member; on a tie the first to be counted.
    let best = votes
        .iter()
        .fold(None::<(&str, usize)>, |b, &(m, n)| match b {
            Some((_, bn)) if bn >= n => b,
            _ => Some((m, n)),
        });
    // (Broken on purpose: once any node granted, every node that answered counts.)
    let minority = best.is_some() && broken::slot_minority();
    let answers = replies
        .iter()
        .map(|r| match r {
            SlotReply::Granted(_) | SlotReply::Busy(_) if minority => NodeAnswer::Ok,
            SlotReply::Granted(m) if best.is_some_and(|(b, _)| b == m) => NodeAnswer::Ok,
            SlotReply::Granted(_) => NodeAnswer::Held { pttl_ms: None },
            SlotReply::Busy(wait) => NodeAnswer::Held { pttl_ms: *wait },
            SlotReply::Failed(answer) => answer.clone(),
        })
        .collect::<Vec<_>>();
    let stray = replies
        .iter()
        .map(|r| matches!(r, SlotReply::Granted(m) if best.is_none_or(|(b, _)| b != m)))
        .collect();
    let granted = answers
        .iter()
        .filter(|a| matches!(a, NodeAnswer::Ok))
        .count();
    let member = best
        .filter(|_| granted >= needed(replies.len()))
        .map(|(m, _)| m.to_string());
    SlotVerdict {
        answers,
        member,
        stray,
    }
}

/// One slot attempt's replies as they came (`None`: none in time, read as
/// a timeout), and for each node whether it may hold slots its holder will
/// not keep: any node but a busy one, one never reached, or one that
/// granted the holder's own member.
pub fn read_slots(replies: &[Option<SlotReply>]) -> (SlotVerdict, Vec<bool>) {
    let replies: Vec<SlotReply> = replies
        .iter()
        .map(|r| r.clone().unwrap_or(SlotReply::Failed(NodeAnswer::Timeout)))
        .collect();
    let v = slot_verdict(&replies);
    let elsewhere = replies
        .iter()
        .map(|r| match (r, &v.member) {
            // Held, or never sent: nothing written there.
            (SlotReply::Busy(_), _) | (SlotReply::Failed(NodeAnswer::Unreachable(_)), _) => false,
            (SlotReply::Granted(m), Some(won)) => m != won,
            _ => true,
        })
        .collect();
    (v, elsewhere)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::quorum::Tally;

    fn granted(m: &str) -> SlotReply {
        SlotReply::Granted(m.to_string())
    }

    #[test]
    fn a_slot_attempt_wins_with_the_member_a_quorum_granted() {
        let v = slot_verdict(&[
            granted("2:0-1:u"),
            granted("2:0-1:u"),
            granted("2:0.2:u"),
            SlotReply::Busy(Some(40)),
            granted("2:0-1:u"),
        ]);
        assert_eq!(v.member.as_deref(), Some("2:0-1:u"));
        assert_eq!(v.stray, [false, false, true, false, false]);
        assert_eq!(v.answers[2], NodeAnswer::Held { pttl_ms: None });
        assert_eq!(v.answers[3], NodeAnswer::Held { pttl_ms: Some(40) });
        assert_eq!(
            v.answers.iter().filter(|a| **a == NodeAnswer::Ok).count(),
            3
        );
    }

    #[test]
    fn slots_granted_by_a_minority_do_not_count() {
        // Three nodes granted something, but no two the same slots.
        let v = slot_verdict(&[
            granted("1:0:u"),
            granted("1:1:u"),
            granted("1:2:u"),
            SlotReply::Failed(NodeAnswer::Timeout),
            SlotReply::Busy(None),
        ]);
        assert_eq!(v.member, None);
        assert_eq!(v.stray, [false, true, true, false, false]);
        let t = Tally::of(&v.answers);
        assert!(!t.agreed());
        assert!(t.held > 0, "contended: worth waiting for");
        let v = slot_verdict(&[granted("1:0:u"), granted("1:0:u"), SlotReply::Busy(None)]);
        assert_eq!(v.member.as_deref(), Some("1:0:u"));
        let v = slot_verdict(&[
            granted("1:0:u"),
            SlotReply::Failed(NodeAnswer::Timeout),
            SlotReply::Failed(NodeAnswer::Timeout),
        ]);
        assert_eq!(v.member, None);
    }

    #[test]
    fn on_a_tie_the_first_member_counted_is_judged() {
        let v = slot_verdict(&[
            granted("1:0:u"),
            granted("1:1:u"),
            granted("1:1:u"),
            granted("1:0:u"),
        ]);
        assert_eq!(v.member, None, "two of four is no quorum");
        assert_eq!(v.answers[0], NodeAnswer::Ok);
        assert_eq!(v.answers[1], NodeAnswer::Held { pttl_ms: None });
        assert_eq!(v.stray, [false, true, true, false]);
    }

    #[test]
    fn nodes_that_failed_keep_their_answer_and_wrote_nothing_stray() {
        let v = slot_verdict(&[
            SlotReply::Failed(NodeAnswer::Timeout),
            granted("2:0-1:u"),
            granted("2:0-1:u"),
        ]);
        assert_eq!(v.member.as_deref(), Some("2:0-1:u"));
        assert_eq!(v.answers[0], NodeAnswer::Timeout);
        assert_eq!(v.stray, [false, false, false]);
    }
}
