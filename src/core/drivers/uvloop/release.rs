//! A release on the fast path: `ops::release` fed the replies as the JS
//! thread's loop reads them.

use std::sync::Arc;
use std::time::Duration;

use super::{Decided, Late, Packed, Reply};
use crate::core::engine::ending;
use crate::core::engine::inner::Inner;
use crate::core::engine::lock::LockState;
use crate::core::engine::lock::{Lock, Release};
use crate::core::error::Result;
use crate::core::model::keys::CHANNEL_PREFIX;
use crate::core::ops;
use crate::core::transport::uvloop::owed::Script;

/// A release on every node, its answers so far.
pub struct FastRelease {
    inner: Arc<Inner>,
    state: Arc<LockState>,
    timeout: Duration,
    op: ops::release::Release,
    late: Late,
}

/// Starts releasing `lock`: the operation and the command every node gets;
/// `Err` with the answer when there is nothing to send (it had already
/// ended), as on tokio.
pub fn fast_release(lock: &Lock) -> std::result::Result<(FastRelease, Packed), Release> {
    let (state, inner) = lock.parts();
    if !ending::let_go(inner, state) {
        return Err(Release::NotHeld);
    }
    let call = ops::release::call_for(state.kind, &state.keys, &state.token, CHANNEL_PREFIX, None);
    let packed = Packed::for_nodes(Script::of(call), inner.nodes.len());
    let op = FastRelease {
        op: ops::release::Release::new(inner.nodes.len(), state.keys.len()),
        late: Late::new(inner.clone(), state.clone()),
        inner: inner.clone(),
        state: state.clone(),
        timeout: inner.cfg.command_timeout,
    };
    Ok((op, packed))
}

impl Decided for FastRelease {
    type Out = Release;

    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn faulted(&self) -> bool {
        self.op.faulted()
    }

    fn answer(&mut self, i: usize, reply: Reply) -> Option<Result<Release>> {
        let answers = self.late.follow(self.op.on_reply(i, reply))?;
        Some(crate::core::engine::at_quorum::released_by_caller(
            &self.inner,
            &self.state,
            &answers,
            Some(self.op.heard()),
        ))
    }
}
