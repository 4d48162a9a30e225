//! A manual extension on the fast path: `ops::extend` fed the replies as
//! the JS thread's loop reads them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Decided, Late, Packed, Reply};
use crate::core::base::ms_of;
use crate::core::engine::inner::Inner;
use crate::core::engine::lock::Lock;
use crate::core::engine::lock::LockState;
use crate::core::engine::renew;
use crate::core::error::Result;
use crate::core::ops;
use crate::core::transport::uvloop::owed::Script;

/// A manual extension on every node, its answers so far.
pub struct FastExtend {
    inner: Arc<Inner>,
    state: Arc<LockState>,
    ttl: Duration,
    started: Instant,
    timeout: Duration,
    op: ops::extend::Extend,
    late: Late,
    /// Holds off renewals of this lock until the outcome.
    lease: Option<crate::core::engine::lock::LeaseGuard>,
}

/// Starts extending `lock` to `ttl` at `now`: the operation and the command
/// every node gets; `None` sends it the tokio way,
/// which gives every error of a lock that cannot be extended, and waits for
/// a renewal of it in flight.
pub fn fast_extend(lock: &Lock, ttl: Duration, now: Instant) -> Option<(FastExtend, Packed)> {
    let (state, inner) = lock.parts();
    let single_acked = state.wait_replicas.is_some() && inner.nodes.len() == 1;
    if single_acked || renew::extendable(inner, state, ttl).is_err() {
        return None;
    }
    let lease = state.try_lease_guard()?;
    state.next_generation();
    let packed = Script::of(ops::extend::call(
        state.kind,
        &state.keys,
        &state.token,
        ms_of(ttl),
    ));
    let packed = Packed::for_nodes(packed, inner.nodes.len());
    let op = FastExtend {
        op: ops::extend::Extend::new(inner.nodes.len()),
        late: Late::new(inner.clone(), state.clone()),
        inner: inner.clone(),
        state: state.clone(),
        ttl,
        started: now,
        timeout: inner.cfg.node_timeout_for(ttl),
        lease: Some(lease),
    };
    Some((op, packed))
}

impl Decided for FastExtend {
    type Out = ();

    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn faulted(&self) -> bool {
        self.op.faulted()
    }

    fn answer(&mut self, i: usize, reply: Reply) -> Option<Result<()>> {
        let answers = self.late.follow(self.op.on_reply(i, reply))?;
        self.lease.as_ref()?;
        let out = renew::extended(&self.inner, &self.state, &answers, self.started, self.ttl);
        self.lease = None;
        Some(out)
    }
}
