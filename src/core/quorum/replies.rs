//! One operation's answers from every node so far, and what else each node
//! returned: the bookkeeping of the one collector, `ops::Gather`, fed one
//! reply at a time by either driver.

use super::Tally;
use crate::core::error::NodeAnswer;

/// Each node's answer (and extra) once in.
pub struct Replies<T> {
    replies: Vec<Option<(NodeAnswer, T)>>,
}

impl<T> Replies<T> {
    pub fn new(nodes: usize) -> Replies<T> {
        Replies {
            replies: (0..nodes).map(|_| None).collect(),
        }
    }

    /// Node `i`'s answer; false for a node there is not.
    pub fn put(&mut self, i: usize, answer: NodeAnswer, extra: T) -> bool {
        match self.replies.get_mut(i) {
            Some(slot) => {
                *slot = Some((answer, extra));
                true
            }
            None => false,
        }
    }

    pub fn nodes(&self) -> usize {
        self.replies.len()
    }

    pub fn all_in(&self) -> bool {
        self.replies.iter().all(Option::is_some)
    }

    /// Some node answered with a fault.
    pub fn faulted(&self) -> bool {
        self.replies.iter().flatten().any(|(a, _)| a.is_fault())
    }

    /// The tally of the answers in, counting every node.
    pub fn tally(&self) -> Tally {
        let mut t = Tally::of(&self.answers());
        t.nodes = self.replies.len();
        t
    }

    /// One answer per node; [`NodeAnswer::Pending`] for a node still out.
    pub fn answers(&self) -> Vec<NodeAnswer> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_still_out_are_pending_and_counted() {
        let mut r: Replies<i64> = Replies::new(3);
        assert!(r.put(1, NodeAnswer::Ok, 4));
        assert_eq!(
            r.answers(),
            [NodeAnswer::Pending, NodeAnswer::Ok, NodeAnswer::Pending]
        );
        let t = r.tally();
        assert_eq!((t.nodes, t.ok), (3, 1));
        assert!(!r.all_in());
        assert_eq!(r.extras().copied().collect::<Vec<_>>(), [4]);
    }

    #[test]
    fn a_node_there_is_not_is_refused() {
        let mut r: Replies<()> = Replies::new(1);
        assert!(!r.put(1, NodeAnswer::Ok, ()));
        assert!(r.put(0, NodeAnswer::Timeout, ()));
        assert!(r.all_in());
        assert!(r.faulted());
    }
}
