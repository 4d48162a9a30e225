//! The token-checked undo of an attempt that did not win, on every node that
//! may hold its token.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;

use crate::core::model::{Attempt, LockKind};
use crate::core::shared::Inner;

/// An attempt's undo: the nodes still to be undone.
pub(super) struct Undo(Vec<usize>);

impl Undo {
    /// The undo of `attempt`, due on every node that may hold its token.
    pub(super) fn of(attempt: &Attempt) -> Undo {
        Undo(attempt.to_undo())
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
        let nodes = std::mem::take(&mut self.0);
        release(inner, keys, token, kind, &nodes, timeout).await;
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
        inner.undo_in_background(keys, token, kind, self.0, timeout)
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

    use super::*;
    use crate::core::error::NodeAnswer;

    #[test]
    fn only_the_nodes_that_may_hold_the_token_are_undone() {
        let answers = vec![NodeAnswer::Ok, NodeAnswer::Held { pttl_ms: Some(9) }];
        let attempt = Attempt::answered(answers, Instant::now(), vec![true, true]);
        assert_eq!(Undo::of(&attempt).0, [0]);
    }
}
