//! Registering a won attempt as a held lock: the lock's state, its counters,
//! and its place in the watchdog; a lock registered as `close()` ran is
//! given back.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::core::broken;
use crate::core::config::AcquireSpec;
use crate::core::error::Result;
use crate::core::lock::Lock;
use crate::core::lock_state::{LockState, NewLock};
use crate::core::model::{Answers, LateAnswers, LockKind, Request};
use crate::core::ops::acquisition::Won as MachineWon;
use crate::core::shared::Inner;
use crate::core::time::later;

impl Inner {
    /// Registers `won`, an attempt at `keys` with `spec`, as a held lock of
    /// `kind`, renewed by the watchdog (which this starts, so it runs within
    /// the runtime); `replicas`: how many acknowledged it (`waitReplicas`).
    /// Its nodes still out answer into the lock's record through the
    /// [`LateAnswers`] returned.
    fn register(
        self: &Arc<Self>,
        keys: Vec<String>,
        kind: LockKind,
        won: MachineWon,
        spec: &AcquireSpec,
        replicas: Option<u32>,
    ) -> (Lock, LateAnswers) {
        let record = Answers::default();
        let late = record.begin(won.answers);
        let started = broken::validity_start(won.started);
        let drift = self.cfg.drift_for(spec.ttl);
        let state = Arc::new(LockState::new(NewLock {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            keys,
            prefix_len: self.cfg.key_prefix.len(),
            token: won.token,
            kind,
            attempts: won.attempts,
            deadline: later(started, spec.ttl.saturating_sub(drift)),
            ttl: spec.ttl,
            renew_every: spec.renew_interval,
            hold_until: spec.max_hold.map(|h| later(started, h)),
            auto_renew: spec.auto_renew,
            // Counters start at 1: 0 is an attempt that took no fence
            // (permits), which has none rather than a misleading 0.
            fence: Some(won.fence).filter(|&f| self.cfg.fencing && f > 0),
            wait_replicas: spec.wait_replicas,
            answers: record,
        }));
        state.set_replicas(replicas);
        self.stats.acquired.fetch_add(1, Ordering::Relaxed);
        self.stats.held.fetch_add(1, Ordering::Relaxed);
        self.watchdog.start(self);
        self.watchdog.watch(state.clone());
        (Lock::new(state, self.clone()), late)
    }

    /// `lock`, just registered, or `ERR_LOCK_CLOSED` when `close()` ran while
    /// it was being registered: it is then given back in the background
    /// (which `close()` awaits), whichever driver took it.
    pub(crate) fn unless_closed(self: &Arc<Self>, lock: Lock) -> Result<Lock> {
        if let Err(closed) = self.ensure_accepting() {
            self.in_background(async move {
                let _ = lock.release().await;
            });
            return Err(closed);
        }
        Ok(lock)
    }
}

/// A won attempt becomes a held lock of `request` on `keys` (none if the
/// client was closed meanwhile: it is given back); `replicas`: how many
/// acknowledged it (`waitReplicas`). The late answers of its nodes still
/// out go to the lock's record through the [`LateAnswers`].
pub(crate) fn register(
    inner: &Arc<Inner>,
    keys: Vec<String>,
    won: MachineWon,
    request: &Request,
    replicas: Option<u32>,
) -> (Result<Lock>, LateAnswers) {
    let kind = LockKind::of(request.permits);
    let (lock, late) = inner.register(keys, kind, won, &request.spec, replicas);
    (inner.unless_closed(lock), late)
}
