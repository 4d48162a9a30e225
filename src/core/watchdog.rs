//! One renewal scheduler per client, on tokio: it decides *when*, and leaves
//! *how* to its [`Renewer`] (see `renew.rs`). Locks due for renewal go out
//! together, as one batch; a lock whose local deadline passes without a
//! successful renewal is handed back as expired.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::core::lock_state::{LockState, Status};
use crate::core::sync;
use crate::core::time::{later, to_us};

/// What the scheduler drives: it owns the watchdog and acts on its verdicts.
pub trait Renewer: Send + Sync + 'static {
    fn watchdog(&self) -> &Watchdog;
    /// A lock's deadline passed without a successful renewal.
    fn expired(self: &Arc<Self>, state: &Arc<LockState>);
    /// Renews a batch; must report each lock with [`Watchdog::done`].
    fn renew(self: Arc<Self>, batch: Vec<Arc<LockState>>) -> impl Future<Output = ()> + Send;
}

struct Entry {
    state: Arc<LockState>,
    next_renew: Instant,
    in_flight: bool,
}

#[derive(Default)]
pub struct Watchdog {
    entries: Mutex<HashMap<u64, Entry>>,
    wake: Arc<Notify>,
    /// When the scheduler plans to look next (0: it has not looked yet); a new
    /// entry due earlier wakes it.
    planned_us: AtomicU64,
    started: AtomicBool,
    stop: CancellationToken,
}

/// How soon a failed renewal is tried again while validity remains.
fn quick_retry(every: Duration) -> Duration {
    (every / 5).clamp(Duration::from_millis(5), Duration::from_millis(250))
}

impl Watchdog {
    /// Starts the scheduler task once; it holds its owner only weakly.
    pub fn start<R: Renewer>(&self, owner: &Arc<R>) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let started = crate::core::sync::spawn(run(
            Arc::downgrade(owner),
            self.wake.clone(),
            self.stop.clone(),
        ));
        // No runtime left to run it (the environment ends): a later lock may
        // still find one.
        if !started {
            self.started.store(false, Ordering::Release);
        }
    }

    pub fn stop(&self) {
        self.stop.cancel();
    }

    pub fn watch(&self, state: Arc<LockState>) {
        // One interval after the lease began (its deadline less the TTL),
        // not after it was registered: an acquisition whose reply (or whose
        // connect) took long has that much less validity left to renew in.
        let every = state.renew_every();
        let from_lease = state
            .deadline()
            .checked_sub(state.ttl().saturating_sub(every));
        let next_renew = match from_lease {
            Some(at) => at.min(later(Instant::now(), every)),
            None => later(Instant::now(), every),
        };
        let due = to_us(next_renew.min(state.deadline()));
        sync::lock(&self.entries).insert(
            state.id,
            Entry {
                state,
                next_renew,
                in_flight: false,
            },
        );
        // Waking the scheduler for every acquire would cost a task switch each;
        // only an entry due before its planned wake-up needs it.
        let planned = self.planned_us.load(Ordering::Acquire);
        if planned == 0 || due < planned {
            self.wake.notify_one();
        }
    }

    pub fn unwatch(&self, id: u64) {
        sync::lock(&self.entries).remove(&id);
    }

    /// After a manual extend: the next renewal is one interval from now.
    pub fn reschedule(&self, id: u64) {
        if let Some(e) = sync::lock(&self.entries).get_mut(&id) {
            e.next_renew = later(Instant::now(), e.state.renew_every());
        }
        self.wake.notify_one();
    }

    /// Every lock still watched (for close).
    pub fn drain(&self) -> Vec<Arc<LockState>> {
        sync::lock(&self.entries)
            .drain()
            .map(|(_, e)| e.state)
            .collect()
    }

    /// One pass: returns the locks to renew now, those past their deadline, and
    /// when to look again.
    fn scan(&self, now: Instant) -> (Vec<Arc<LockState>>, Vec<Arc<LockState>>, Instant) {
        let mut next_wake = now + Duration::from_secs(3600);
        let mut expired = Vec::new();
        let mut batch = Vec::new();
        let mut entries = sync::lock(&self.entries);
        entries.retain(|_, e| e.state.status() == Status::Held);
        let mut any_due = false;
        for e in entries.values() {
            let deadline = e.state.deadline();
            if now >= deadline {
                expired.push(e.state.clone());
                continue;
            }
            next_wake = next_wake.min(deadline);
            if e.in_flight || !e.state.renewable(now) {
                continue;
            }
            if now >= e.next_renew {
                any_due = true;
            } else {
                next_wake = next_wake.min(e.next_renew);
            }
        }
        if any_due {
            // Locks due within a quarter of their interval ride along: renewing a
            // little early is harmless and keeps renewals in few, large batches.
            for e in entries.values_mut() {
                if e.in_flight || now >= e.state.deadline() || !e.state.renewable(now) {
                    continue;
                }
                if e.next_renew <= later(now, e.state.renew_every() / 4) {
                    e.in_flight = true;
                    batch.push(e.state.clone());
                }
            }
        }
        for s in &expired {
            entries.remove(&s.id);
        }
        // The loop sleeps until `next_wake` (a batch in flight nudges it when done).
        self.planned_us.store(to_us(next_wake), Ordering::Release);
        (batch, expired, next_wake)
    }

    /// Records a batch's outcome for one lock: the next renewal is a full
    /// interval after the batch was sent if it worked, soon if it did not.
    pub fn done(&self, id: u64, renewed: bool, sent_at: Instant) {
        if let Some(e) = sync::lock(&self.entries).get_mut(&id) {
            e.in_flight = false;
            let every = e.state.renew_every();
            e.next_renew = if renewed {
                later(sent_at, every)
            } else {
                Instant::now() + quick_retry(every)
            };
        }
    }

    pub fn nudge(&self) {
        self.wake.notify_one();
    }
}

async fn run<R: Renewer>(owner: Weak<R>, wake: Arc<Notify>, stop: CancellationToken) {
    loop {
        let next_wake = {
            let Some(owner) = owner.upgrade() else {
                return;
            };
            let (batch, expired, next_wake) = owner.watchdog().scan(Instant::now());
            for state in expired {
                owner.expired(&state);
            }
            if !batch.is_empty() {
                tokio::spawn(owner.clone().renew(batch));
            }
            next_wake
        };
        tokio::select! {
            _ = tokio::time::sleep_until(next_wake.into()) => {}
            _ = wake.notified() => {}
            _ = stop.cancelled() => return,
        }
    }
}
