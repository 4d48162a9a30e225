//! Sending one operation to every node and collecting the answers only until
//! its outcome is decided: the nodes still out are finished by one counted
//! background task of the client (bounded by their node timeout, awaited by
//! `close()`, their faults still reported through `'error'`).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::stream::{FuturesUnordered, StreamExt};

use super::Tally;
use crate::core::error::NodeAnswer;
use crate::core::lock_state::{Answers, LockState};
use crate::core::node::Renewal;
use crate::core::shared::Inner;

/// One node's call: its answer and what else the operation reads from it.
pub type Call<T> = BoxFuture<'static, (NodeAnswer, T)>;

type Out<T> = BoxFuture<'static, (usize, (NodeAnswer, T))>;

/// An operation sent to every node, its answers so far.
pub struct FanOut<T> {
    replies: Vec<Option<(NodeAnswer, T)>>,
    rest: FuturesUnordered<Out<T>>,
}

impl<T: Send + 'static> FanOut<T> {
    /// Starts every call (they run as they are polled, side by side).
    pub fn new(calls: Vec<Call<T>>) -> FanOut<T> {
        let replies = calls.iter().map(|_| None).collect();
        let rest = calls
            .into_iter()
            .enumerate()
            .map(|(i, call)| -> Out<T> { Box::pin(async move { (i, call.await) }) })
            .collect();
        FanOut { replies, rest }
    }

    /// The tally of the answers in, counting every node.
    pub fn tally(&self) -> Tally {
        let mut t = Tally::of(&self.answers());
        t.nodes = self.replies.len();
        t
    }

    /// Collects answers until `decided` holds for their tally, or all are in.
    pub async fn until(&mut self, decided: impl Fn(&Tally) -> bool) {
        while !decided(&self.tally()) {
            match self.rest.next().await {
                Some((i, reply)) => self.replies[i] = Some(reply),
                None => return,
            }
        }
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

    /// Hands the nodes still out to a background task of `inner`, which
    /// reports their faults as they come and records each answer in
    /// `record` (the answers of operation `op`).
    pub fn finish_in_background(self, inner: &Arc<Inner>, record: Option<(Answers, u64)>) {
        let mut rest = self.rest;
        if rest.is_empty() {
            return;
        }
        let reporter = inner.clone();
        inner.in_background(async move {
            while let Some((i, (answer, _))) = rest.next().await {
                if answer.is_fault() {
                    reporter.report_fault(&reporter.nodes[i], &answer);
                }
                if let Some((record, op)) = &record {
                    record.late(*op, i, answer);
                }
            }
        });
    }
}

impl Inner {
    /// Token-checked release of a lock's keys on every node, answered once a
    /// quorum deleted them (or, failing that, once every node answered).
    pub(crate) async fn release_until_decided(
        self: &Arc<Self>,
        state: &LockState,
    ) -> Vec<NodeAnswer> {
        let timeout = self.cfg.command_timeout;
        let keys: Arc<[String]> = state.keys.clone().into();
        let token: Arc<str> = state.token.as_str().into();
        let calls = (0..self.nodes.len())
            .map(|i| -> Call<()> {
                let (inner, keys, token) = (self.clone(), keys.clone(), token.clone());
                Box::pin(async move { (inner.nodes[i].release(&keys, &token, timeout).await, ()) })
            })
            .collect();
        let mut fan = FanOut::new(calls);
        fan.until(Tally::agreed).await;
        let answers = fan.answers();
        let op = state.answers.start(answers.clone());
        fan.finish_in_background(self, Some((state.answers.clone(), op)));
        answers
    }
}

impl Inner {
    /// One lock's extension on every node, answered once a quorum re-armed
    /// its keys (or, failing that, once every node answered).
    pub(crate) async fn extend_until_decided(
        self: &Arc<Self>,
        renewal: &Renewal<'_>,
        timeout: Duration,
        record: &Answers,
    ) -> Vec<NodeAnswer> {
        let keys: Arc<[String]> = renewal.keys.into();
        let token: Arc<str> = renewal.token.into();
        let ttl_ms = renewal.ttl_ms;
        let calls = (0..self.nodes.len())
            .map(|i| -> Call<()> {
                let (inner, keys, token) = (self.clone(), keys.clone(), token.clone());
                Box::pin(async move {
                    let one = [Renewal {
                        keys: &keys,
                        token: &token,
                        ttl_ms,
                    }];
                    let mut answers = inner.nodes[i].extend_batch(&one, timeout).await;
                    (answers.pop().unwrap_or(NodeAnswer::Timeout), ())
                })
            })
            .collect();
        let mut fan = FanOut::new(calls);
        fan.until(Tally::agreed).await;
        let answers = fan.answers();
        let op = record.start(answers.clone());
        fan.finish_in_background(self, Some((record.clone(), op)));
        answers
    }
}

#[cfg(test)]
mod tests {
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
}
