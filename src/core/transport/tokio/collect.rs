//! One operation's calls to every node, run side by side on tokio, each
//! answer fed to the operation's one collector ([`Gather`], the same the JS
//! thread's driver feeds) until it is decided; the nodes still out answer
//! into it in the background.

use futures_util::future::BoxFuture;
use futures_util::stream::{FuturesUnordered, StreamExt};

use crate::core::error::NodeAnswer;
use crate::core::ops::gather::{Gather, Progress};
use crate::core::ops::{LateAnswers, SharedAnswers};

/// One node's call: its answer and what else the operation reads from it.
pub type Call<T> = BoxFuture<'static, (NodeAnswer, T)>;

/// A call tagged with its node's index.
type Out<T> = BoxFuture<'static, (usize, (NodeAnswer, T))>;

/// An operation sent to every node: its collector and the calls still out.
pub struct Collect<T> {
    gather: Gather<T>,
    rest: FuturesUnordered<Out<T>>,
    /// Where the answers are kept, late ones included.
    record: Option<SharedAnswers>,
    /// Once decided: where its late answers go.
    late: Option<LateAnswers>,
}

impl<T: Send + 'static> Collect<T> {
    /// Starts every call (they run as they are polled, side by side).
    pub fn new(calls: Vec<Call<T>>, record: Option<SharedAnswers>) -> Collect<T> {
        let gather = Gather::new(calls.len());
        let rest = calls
            .into_iter()
            .enumerate()
            .map(|(i, call)| -> Out<T> { Box::pin(async move { (i, call.await) }) })
            .collect();
        Collect {
            gather,
            rest,
            record,
            late: None,
        }
    }

    /// Feeds the answers in until `decided` holds for them, or every node
    /// answered: one answer per node, [`NodeAnswer::Pending`] for those out.
    pub async fn until(&mut self, decided: impl Fn(&Gather<T>) -> bool) -> Vec<NodeAnswer> {
        while let Some((i, (answer, extra))) = self.rest.next().await {
            let progress = self
                .gather
                .offer(i, answer, extra, |g| g.all_in() || decided(g));
            if let Progress::Decided(answers) = progress {
                self.late = self.record.clone().map(|r| LateAnswers::begin(r, &answers));
                return answers.into_vec();
            }
        }
        self.gather.answers().into_vec()
    }

    /// The answers so far and what else each node returned.
    pub fn gather(&self) -> &Gather<T> {
        &self.gather
    }

    /// Whether every node answered.
    pub fn all_in(&self) -> bool {
        self.rest.is_empty()
    }

    /// Waits for the nodes still out, each answer recorded as late; `fault`
    /// hears each late fault (the caller's `'error'` event).
    pub async fn finish(mut self, fault: impl Fn(usize, &NodeAnswer)) {
        while let Some((i, (answer, extra))) = self.rest.next().await {
            if let Progress::Late {
                answer, fault: f, ..
            } = self.gather.offer(i, answer, extra, |_| true)
            {
                if let Some(late) = &self.late {
                    late.put(i, answer);
                }
                if let Some(f) = f {
                    fault(i, &f);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;

    fn after(ms: u64, answer: NodeAnswer) -> Call<()> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            (answer, ())
        })
    }

    fn now<T: Send + 'static>(answer: NodeAnswer, extra: T) -> Call<T> {
        Box::pin(async move { (answer, extra) })
    }

    #[tokio::test]
    async fn a_quorum_decides_without_the_slowest_node() {
        let mut c = Collect::new(
            vec![
                after(1, NodeAnswer::Ok),
                after(10_000, NodeAnswer::Timeout),
                after(2, NodeAnswer::Ok),
            ],
            None,
        );
        let answers = c.until(Gather::at_quorum).await;
        assert_eq!(
            answers,
            [NodeAnswer::Ok, NodeAnswer::Pending, NodeAnswer::Ok]
        );
        assert!(!c.all_in(), "the slow node is still out");
    }

    #[tokio::test]
    async fn without_a_quorum_every_node_is_waited_for() {
        let mut c = Collect::new(
            vec![
                after(1, NodeAnswer::Ok),
                after(50, NodeAnswer::Held { pttl_ms: Some(5) }),
                after(80, NodeAnswer::Timeout),
            ],
            None,
        );
        let answers = c.until(|g| g.tally().agreed()).await;
        assert_eq!(
            answers,
            [
                NodeAnswer::Ok,
                NodeAnswer::Held { pttl_ms: Some(5) },
                NodeAnswer::Timeout
            ]
        );
        assert!(c.all_in());
    }

    #[tokio::test]
    async fn extras_come_only_from_nodes_that_answered() {
        let mut c = Collect::new(
            vec![
                now(NodeAnswer::Ok, 7_i64),
                now(NodeAnswer::Ok, 9_i64),
                Box::pin(async {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    (NodeAnswer::Ok, 100_i64)
                }),
            ],
            None,
        );
        c.until(Gather::at_quorum).await;
        assert_eq!(c.gather().extras().copied().max(), Some(9));
    }

    #[tokio::test]
    async fn late_answers_reach_the_record_and_their_faults_are_heard() {
        let record = std::sync::Arc::new(crate::core::ops::Answers::default());
        let mut c = Collect::new(
            vec![
                now(NodeAnswer::Ok, ()),
                now(NodeAnswer::Ok, ()),
                after(5, NodeAnswer::Timeout),
            ],
            Some(record.clone()),
        );
        c.until(Gather::at_quorum).await;
        assert_eq!(record.get()[2], NodeAnswer::Pending, "decided without it");
        let heard = Mutex::new(Vec::new());
        c.finish(|i, a| heard.lock().expect("unpoisoned").push((i, a.clone())))
            .await;
        assert_eq!(
            heard.into_inner().expect("unpoisoned"),
            [(2, NodeAnswer::Timeout)]
        );
        assert_eq!(record.get()[2], NodeAnswer::Timeout, "recorded late");
    }

    #[tokio::test]
    async fn no_calls_decide_nothing_and_leave_nothing_out() {
        let mut c: Collect<()> = Collect::new(Vec::new(), None);
        assert!(c.until(Gather::at_quorum).await.is_empty());
        assert!(c.all_in());
    }
}
