//! Collecting one operation's answers from every node only until its outcome
//! is decided: pure bookkeeping over the nodes' calls (whatever they are),
//! with no knowledge of the client. The calls still out are handed back
//! ([`FanOut::into_rest`]) for the client to finish in the background.

use futures_util::future::BoxFuture;
use futures_util::stream::{FuturesUnordered, StreamExt};

use super::replies::Replies;
use super::Tally;
use crate::core::error::NodeAnswer;

/// One node's call: its answer and what else the operation reads from it.
pub type Call<T> = BoxFuture<'static, (NodeAnswer, T)>;

/// A call tagged with its node's index.
pub type Out<T> = BoxFuture<'static, (usize, (NodeAnswer, T))>;

/// An operation sent to every node, its answers so far.
pub struct FanOut<T> {
    replies: Replies<T>,
    rest: FuturesUnordered<Out<T>>,
}

impl<T: Send + 'static> FanOut<T> {
    /// Starts every call (they run as they are polled, side by side).
    pub fn new(calls: Vec<Call<T>>) -> FanOut<T> {
        let replies = Replies::new(calls.len());
        let rest = calls
            .into_iter()
            .enumerate()
            .map(|(i, call)| -> Out<T> { Box::pin(async move { (i, call.await) }) })
            .collect();
        FanOut { replies, rest }
    }

    /// The tally of the answers in, counting every node.
    pub fn tally(&self) -> Tally {
        self.replies.tally()
    }

    /// Collects answers until `decided` holds for their tally, or all are in.
    pub async fn until(&mut self, decided: impl Fn(&Tally) -> bool) {
        while !decided(&self.tally()) {
            match self.rest.next().await {
                Some((i, (answer, extra))) => {
                    self.replies.put(i, answer, extra);
                }
                None => return,
            }
        }
    }

    /// One answer per node; [`NodeAnswer::Pending`] for a node still out.
    pub fn answers(&self) -> Vec<NodeAnswer> {
        self.replies.answers()
    }

    /// What else each node that answered returned.
    pub fn extras(&self) -> impl Iterator<Item = &T> {
        self.replies.extras()
    }

    /// The calls still out, each with its node's index, to be finished by
    /// whoever owns the background (answers after the outcome was decided).
    pub fn into_rest(self) -> FuturesUnordered<Out<T>> {
        self.rest
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn after(ms: u64, answer: NodeAnswer) -> Call<()> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            (answer, ())
        })
    }

    #[tokio::test]
    async fn a_quorum_decides_without_the_slowest_node() {
        let mut fan = FanOut::new(vec![
            after(1, NodeAnswer::Ok),
            after(10_000, NodeAnswer::Timeout),
            after(2, NodeAnswer::Ok),
        ]);
        fan.until(Tally::agreed).await;
        assert_eq!(
            fan.answers(),
            [NodeAnswer::Ok, NodeAnswer::Pending, NodeAnswer::Ok]
        );
        assert!(!fan.rest.is_empty(), "the slow node is still out");
    }

    #[tokio::test]
    async fn without_a_quorum_every_node_is_waited_for() {
        let mut fan = FanOut::new(vec![
            after(1, NodeAnswer::Ok),
            after(50, NodeAnswer::Held { pttl_ms: Some(5) }),
            after(80, NodeAnswer::Timeout),
        ]);
        fan.until(Tally::agreed).await;
        assert_eq!(
            fan.answers(),
            [
                NodeAnswer::Ok,
                NodeAnswer::Held { pttl_ms: Some(5) },
                NodeAnswer::Timeout
            ]
        );
        assert!(fan.rest.is_empty());
    }

    fn now<T: Send + 'static>(answer: NodeAnswer, extra: T) -> Call<T> {
        Box::pin(async move { (answer, extra) })
    }

    #[tokio::test]
    async fn the_tally_counts_every_node_even_those_still_out() {
        let mut fan = FanOut::new(vec![
            after(1, NodeAnswer::Ok),
            after(10_000, NodeAnswer::Ok),
            after(10_000, NodeAnswer::Ok),
        ]);
        assert_eq!(fan.tally().nodes, 3);
        assert_eq!(fan.tally().ok, 0);
        fan.until(|t| t.ok >= 1).await;
        let t = fan.tally();
        assert_eq!((t.nodes, t.ok), (3, 1));
        assert!(!t.agreed(), "one of three is no quorum");
    }

    #[tokio::test]
    async fn extras_come_only_from_nodes_that_answered() {
        let mut fan = FanOut::new(vec![
            now(NodeAnswer::Ok, 7_i64),
            now(NodeAnswer::Ok, 9_i64),
            Box::pin(async {
                tokio::time::sleep(Duration::from_secs(10)).await;
                (NodeAnswer::Ok, 100_i64)
            }),
        ]);
        fan.until(Tally::agreed).await;
        assert_eq!(fan.extras().copied().max(), Some(9));
    }

    #[tokio::test]
    async fn the_nodes_still_out_are_handed_back_with_their_index() {
        let mut fan = FanOut::new(vec![
            now(NodeAnswer::Ok, ()),
            now(NodeAnswer::Ok, ()),
            after(5, NodeAnswer::Timeout),
        ]);
        fan.until(Tally::agreed).await;
        let mut rest = fan.into_rest();
        let mut got = Vec::new();
        while let Some((i, (answer, ()))) = rest.next().await {
            got.push((i, answer));
        }
        assert_eq!(got, [(2, NodeAnswer::Timeout)]);
    }

    #[tokio::test]
    async fn a_decided_outcome_stops_collecting_at_once() {
        let mut fan = FanOut::new(vec![after(10_000, NodeAnswer::Ok)]);
        fan.until(|_| true).await;
        assert_eq!(fan.answers(), [NodeAnswer::Pending]);
        assert_eq!(fan.into_rest().len(), 1);
    }

    #[tokio::test]
    async fn no_calls_decide_nothing_and_leave_nothing_out() {
        let mut fan: FanOut<()> = FanOut::new(Vec::new());
        fan.until(Tally::agreed).await;
        assert!(fan.answers().is_empty());
        assert!(fan.into_rest().is_empty());
    }
}
