//! Counters a client keeps about its locks.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct Stats {
    pub acquired: AtomicU64,
    pub contended: AtomicU64,
    pub renewed: AtomicU64,
    pub lost: AtomicU64,
    pub released: AtomicU64,
    pub errors: AtomicU64,
    pub held: AtomicU64,
    /// Waits ended early by a release notice (the holder released; no polling).
    pub woken: AtomicU64,
    /// Acquisitions the tokio runtime ran rather than the JS thread's loop.
    pub on_tokio: AtomicU64,
}

/// A point-in-time copy of [`Stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub acquired: u64,
    pub contended: u64,
    pub renewed: u64,
    pub lost: u64,
    pub released: u64,
    pub errors: u64,
    pub held: u64,
    pub woken: u64,
    pub on_tokio: u64,
}

impl Stats {
    pub fn snapshot(&self) -> StatsSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StatsSnapshot {
            acquired: get(&self.acquired),
            contended: get(&self.contended),
            renewed: get(&self.renewed),
            lost: get(&self.lost),
            released: get(&self.released),
            errors: get(&self.errors),
            held: get(&self.held),
            woken: get(&self.woken),
            on_tokio: get(&self.on_tokio),
        }
    }
}
