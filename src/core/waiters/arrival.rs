//! The callers of one client acquiring one key, in call order: each sends its
//! first attempt only once every earlier caller's first attempt was answered.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::Notify;

use super::{Waiters, Waker};
use crate::core::sync;
use crate::core::time::wait_until;

/// A caller in a key's line of arrivals.
pub(super) struct Caller {
    pub(super) seq: u64,
    /// Its first attempt was answered without taking the lock.
    pub(super) answered: bool,
    pub(super) turn: Arc<Notify>,
    /// Told when its turn may have come, besides a task waiting in [`Arrival::turn`].
    pub(super) waker: Option<Waker>,
}

/// A caller's place in the line of callers of one client acquiring one key,
/// taken when it is called; leaving it (on drop) lets the next caller go.
pub struct Arrival {
    pub(super) waiters: Arc<Waiters>,
    pub(super) key: String,
    pub(super) seq: u64,
    pub(super) turn: Arc<Notify>,
}

impl Arrival {
    /// Its number in call order (a waiter's place in the queue follows it).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// True when this caller may send its first attempt: every earlier
    /// caller's first attempt was answered (or that caller is done).
    pub fn may_go(&self) -> bool {
        let lines = sync::lock(&self.waiters.lines);
        lines.get(&self.key).is_none_or(|line| {
            line.iter()
                .take_while(|c| c.seq != self.seq)
                .all(|c| c.answered)
        })
    }

    /// Completes once [`Arrival::may_go`].
    pub async fn turn(&self) {
        wait_until(&self.turn, || self.may_go()).await
    }

    /// Tells `waker` when this caller's turn may have come (it then asks
    /// [`Arrival::may_go`]); at once if it has.
    pub fn on_turn(&self, waker: Waker) {
        {
            let mut lines = sync::lock(&self.waiters.lines);
            let me = lines
                .get_mut(&self.key)
                .and_then(|line| line.iter_mut().find(|c| c.seq == self.seq));
            if let Some(me) = me {
                me.waker = Some(waker.clone());
            }
        }
        if self.may_go() {
            waker();
        }
    }

    /// This caller's first attempt was answered without taking the lock: the
    /// next caller may send its own.
    pub fn answered(&self) {
        let mut lines = sync::lock(&self.waiters.lines);
        let Some(line) = lines.get_mut(&self.key) else {
            return;
        };
        let Some(i) = line.iter().position(|c| c.seq == self.seq) else {
            return;
        };
        if !line[i].answered {
            line[i].answered = true;
            wake_from(line, i + 1);
        }
    }
}

impl Drop for Arrival {
    fn drop(&mut self) {
        let mut lines = sync::lock(&self.waiters.lines);
        let Some(line) = lines.get_mut(&self.key) else {
            return;
        };
        let Some(i) = line.iter().position(|c| c.seq == self.seq) else {
            return;
        };
        line.remove(i);
        if line.is_empty() {
            lines.remove(&self.key);
        } else {
            wake_from(line, i);
        }
    }
}

/// Wakes the callers from `i` on that a change there may let go: up to the
/// first one whose first attempt is still out (nobody behind it may go).
pub(super) fn wake_from(line: &VecDeque<Caller>, i: usize) {
    for c in line.iter().skip(i) {
        c.turn.notify_waiters();
        if !c.answered {
            // The first whose first attempt is still out may go now; the
            // answered ones before it began long ago and need no wake.
            if let Some(waker) = &c.waker {
                waker();
            }
            break;
        }
    }
}
