//! The token-checked undo of an attempt that did not win: due here, or
//! already sent by the attempt's maker (the fast path, behind the attempt on
//! its own connections), when only the nodes it did not reach are left.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;

use crate::core::model::{Attempt, LockKind, SentUndo};
use crate::core::shared::Inner;

/// An attempt's undo.
pub(super) enum Undo {
    /// These nodes are still to be undone.
    Due(Vec<usize>),
    /// On its way; the nodes it did not reach come back.
    Sent(SentUndo),
}

impl Undo {
    /// The undo of `attempt`: `sent` when its maker sent it, else due on
    /// every node that may hold its token.
    pub(super) fn of(attempt: &Attempt, sent: Option<Option<SentUndo>>) -> Undo {
        match sent {
            None => Undo::Due(attempt.to_undo()),
            Some(None) => Undo::Due(Vec::new()),
            Some(Some(sent)) => Undo::Sent(sent),
        }
    }

    /// Waits for an undo on its way, no longer than its own bound
    /// (`timeout`, counted from its sending); then only what it missed is
    /// due. One that never told (its loop gone or stalled) is due again
    /// everywhere it went: the undo is token-checked.
    async fn landed(&mut self, timeout: Duration) -> &[usize] {
        if let Undo::Sent(sent) = self {
            let missed = match tokio::time::timeout(timeout, &mut sent.missed).await {
                Ok(Ok(missed)) => missed,
                _ => std::mem::take(&mut sent.nodes),
            };
            *self = Undo::Due(missed);
        }
        match self {
            Undo::Due(nodes) => nodes,
            Undo::Sent(_) => &[],
        }
    }

    /// Done before the next attempt (one node keeps its token, so a late undo
    /// could delete the next attempt's key). Waits no longer than the attempt
    /// itself could: a release queued behind a stalled node's SET still runs
    /// after it, in order, on the same connection.
    pub(super) async fn land(
        &mut self,
        inner: &Inner,
        keys: &[String],
        token: &str,
        kind: LockKind,
        timeout: Duration,
    ) {
        let nodes = self.landed(timeout).await;
        release(inner, keys, token, kind, nodes, timeout).await;
        *self = Undo::Due(Vec::new());
    }

    /// Done in the background, awaited by `close()`.
    pub(super) fn in_background(
        self,
        inner: &Arc<Inner>,
        keys: Vec<String>,
        token: String,
        kind: LockKind,
        timeout: Duration,
    ) {
        match self {
            Undo::Due(nodes) => inner.undo_in_background(keys, token, kind, nodes, timeout),
            Undo::Sent(sent) => {
                let inner2 = inner.clone();
                inner.in_background(async move {
                    let mut undo = Undo::Sent(sent);
                    undo.land(&inner2, &keys, &token, kind, timeout).await;
                });
            }
        }
    }
}

/// Token-checked release of an attempt's keys on `nodes` (see [`Attempt::to_undo`]).
async fn release(
    inner: &Inner,
    keys: &[String],
    token: &str,
    kind: LockKind,
    nodes: &[usize],
    timeout: Duration,
) {
    join_all(
        nodes
            .iter()
            .map(|&i| inner.nodes[i].release(keys, token, kind, timeout)),
    )
    .await;
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use tokio::sync::oneshot;

    use super::*;
    use crate::core::error::NodeAnswer;

    fn attempt() -> Attempt {
        let answers = vec![NodeAnswer::Ok, NodeAnswer::Held { pttl_ms: Some(9) }];
        Attempt::answered(answers, Instant::now(), vec![true, true])
    }

    fn due(undo: &Undo) -> Option<&[usize]> {
        match undo {
            Undo::Due(nodes) => Some(nodes),
            Undo::Sent(_) => None,
        }
    }

    #[test]
    fn an_attempt_made_here_is_undone_here() {
        assert_eq!(due(&Undo::of(&attempt(), None)), Some(&[0][..]));
    }

    #[test]
    fn an_attempt_its_maker_had_nothing_to_undo_for_leaves_nothing_due() {
        assert_eq!(due(&Undo::of(&attempt(), Some(None))), Some(&[][..]));
    }

    #[tokio::test]
    async fn an_undo_sent_elsewhere_leaves_only_what_it_missed() {
        let (tell, missed) = oneshot::channel();
        let mut undo = Undo::of(
            &attempt(),
            Some(Some(SentUndo {
                nodes: vec![0, 1],
                missed,
            })),
        );
        assert!(due(&undo).is_none(), "on its way");
        tell.send(vec![1]).expect("heard");
        assert_eq!(undo.landed(Duration::from_secs(5)).await, [1]);
    }

    #[tokio::test]
    async fn an_undo_whose_sender_went_away_is_due_everywhere_it_went() {
        let (tell, missed) = oneshot::channel::<Vec<usize>>();
        drop(tell);
        let mut undo = Undo::Sent(SentUndo {
            nodes: vec![0, 2],
            missed,
        });
        assert_eq!(undo.landed(Duration::from_secs(5)).await, [0, 2]);
    }

    #[tokio::test]
    async fn an_undo_that_never_tells_is_due_again_after_its_bound() {
        let (_tell, missed) = oneshot::channel::<Vec<usize>>();
        let mut undo = Undo::Sent(SentUndo {
            nodes: vec![1],
            missed,
        });
        assert_eq!(undo.landed(Duration::from_millis(20)).await, [1]);
    }
}
