//! The handle a caller holds: a [`Lock`] reads its [`LockState`] and sends
//! releases and extensions through the client it came from.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::core::engine::ending;
use crate::core::engine::inner::Inner;
use crate::core::engine::lock_state::lost;
use crate::core::engine::lock_state::LockState;
pub use crate::core::engine::lock_state::{Release, Status};
use crate::core::error::{ErrorCode, LockError, NodeReport, Result};

/// What [`Lock::hand_over`] gives the client that continues the lock.
#[derive(Debug, Clone)]
pub struct HandOver {
    /// The keys as the caller named them.
    pub names: Vec<String>,
    pub token: String,
    /// Validity left when it was handed over.
    pub remaining: Duration,
    pub fence: Option<i64>,
}

/// A held lock. Cheap to clone; when the last clone is dropped the watchdog
/// stops renewing it (its state counts the handles: the watchdog's own
/// reference to the state is not one).
pub struct Lock {
    state: Arc<LockState>,
    inner: Arc<Inner>,
}

impl Clone for Lock {
    fn clone(&self) -> Lock {
        Lock::new(self.state.clone(), self.inner.clone())
    }
}

impl Drop for Lock {
    /// A lock nobody can reach any more is never renewed again; its keys expire by TTL.
    fn drop(&mut self) {
        if self.state.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            ending::let_go(&self.inner, &self.state);
        }
    }
}

impl Lock {
    pub(crate) fn new(state: Arc<LockState>, inner: Arc<Inner>) -> Lock {
        state.handles.fetch_add(1, Ordering::Relaxed);
        Lock { state, inner }
    }

    /// The lock's state and the client it belongs to (the fast path's operations).
    pub(crate) fn parts(&self) -> (&Arc<LockState>, &Arc<Inner>) {
        (&self.state, &self.inner)
    }

    fn state(&self) -> &Arc<LockState> {
        &self.state
    }

    pub fn id(&self) -> u64 {
        self.state().id
    }

    /// The keys as the caller named them.
    pub fn names(&self) -> Vec<String> {
        self.state().names().map(str::to_string).collect()
    }

    /// The first key as the caller named it.
    pub fn name(&self) -> &str {
        self.state().names().next().unwrap_or_default()
    }

    pub fn token(&self) -> &str {
        &self.state().token
    }

    /// Replicas that acknowledged the last acquisition or manual extension
    /// (`waitReplicas`); `None` when not asked for, or when WAIT failed.
    pub fn replicas(&self) -> Option<u32> {
        self.state().replicas()
    }

    /// Each node's answer to the last acquisition, extension or release of
    /// this lock; nodes that had not answered when it resolved read `pending`
    /// until they do (see the client's `settled`).
    pub fn nodes(&self) -> Vec<NodeReport> {
        self.inner.reports(&self.state().answers.get())
    }

    pub fn attempts(&self) -> u32 {
        self.state().attempts
    }

    /// The fencing token handed out with this lock (client option `fencing`):
    /// larger for every later acquisition of the same key on that node, fair
    /// or not. `None` without fencing, for permits (semaphores, read-write
    /// locks) and for an adopted lock.
    pub fn fence(&self) -> Option<i64> {
        self.state().fence
    }

    pub fn ttl(&self) -> Duration {
        self.state().ttl()
    }

    pub fn remaining(&self) -> Duration {
        self.state().remaining()
    }

    pub fn is_held(&self) -> bool {
        self.state().is_held()
    }

    pub fn status(&self) -> Status {
        self.state().status()
    }

    /// The monotonic instant the lock's validity ends (if not renewed).
    pub fn deadline(&self) -> Instant {
        self.state().deadline()
    }

    /// Why the lock was lost, if it was.
    pub fn loss(&self) -> Option<LockError> {
        self.state().loss()
    }

    /// What ended the lock before its holder let go: its loss or its
    /// client's close (see [`LockState::ending`]).
    pub fn ending(&self) -> Option<LockError> {
        self.state().ending()
    }

    /// Why the lock is lost, also while its validity ran out before the
    /// watchdog recorded the loss (status still `Held`, no longer held).
    pub fn loss_now(&self) -> Option<LockError> {
        self.loss().or_else(|| {
            let expired = self.status() == Status::Held && !self.is_held();
            expired.then(|| lost(self.name(), "its validity ran out"))
        })
    }

    /// Completes when the lock is released or lost.
    pub async fn ended(&self) {
        self.state().ended().await
    }

    /// Releases the lock everywhere. The watchdog stops first. `Ok(false)` when
    /// it had already been released or lost, or no longer held our token.
    pub async fn release(&self) -> Result<bool> {
        Ok(matches!(self.release_reporting().await?, Release::Released))
    }

    /// [`Lock::release`], telling a loss it found from a lock that had ended.
    pub async fn release_reporting(&self) -> Result<Release> {
        let state = self.state();
        let inner = &self.inner;
        if !ending::let_go(inner, state) {
            return Ok(Release::NotHeld);
        }
        let answers = ending::release_until_decided(inner, state, None).await;
        // (The notices' reach is not read here: waiters hear by the notice.)
        ending::released_by_caller(inner, state, &answers, None)
    }

    /// Lets go of the lock without releasing it, for another client to
    /// continue with `adopt`: the watchdog stops renewing, the keys stay with
    /// their lease, and nothing this handle does later deletes them (a release
    /// resolves false, a loss sends no cleanup). `Err` (`ERR_LOCK_LOST`, or
    /// `ERR_LOCK_CLOSED`) saying why when it was no longer held.
    pub fn hand_over(&self) -> Result<HandOver> {
        let state = self.state();
        let inner = &self.inner;
        let remaining = state.remaining();
        let why = match state.status() {
            _ if inner.ensure_open().is_err() => "its client was closed",
            Status::Released => "it was released",
            Status::HandedOver => "it was handed over",
            Status::Lost => "it is no longer held",
            Status::Held if !state.is_held() => "its validity ran out",
            Status::Held if ending::hand_over(inner, state) => {
                return Ok(HandOver {
                    names: self.names(),
                    token: state.token.to_string(),
                    remaining,
                    fence: state.fence,
                })
            }
            Status::Held => "it is no longer held",
        };
        let label = state.label();
        Err(LockError::new(
            ErrorCode::Lost,
            format!("lock \"{label}\" cannot be handed over: {why}"),
        )
        .with_key(label))
    }

    /// Extends the lease to `ttl` from now (same token) and makes `ttl` the
    /// lease the watchdog keeps renewing. Never recreates a missing key.
    pub async fn extend(&self, ttl: Duration) -> Result<()> {
        crate::core::engine::renew::extend(&self.inner, self.state(), ttl).await
    }
}
