//! One waiting caller's place in a key's queue: woken by a release notice
//! (or a fair hand-off) and consumed when the caller tries.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::core::base;
use crate::core::base::wait_until;

/// What a waiter that is not a task is told when it is woken (the JS
/// thread's driver: it queues its turn there); called on the thread that woke it.
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// One waiting caller's place in a key's queue.
pub struct Place {
    pub(super) id: u64,
    /// The caller's number in call order ([`Arrival::seq`]); places are queued by it.
    pub(in crate::core::engine) seq: u64,
    /// The waiter's token (fair locks: a hand-off names it); empty otherwise.
    pub(super) token: String,
    pub(super) notify: Notify,
    /// Woken and not yet acted on; handed to the next waiter if this one leaves.
    pub(super) woken: AtomicBool,
    /// A fair lock's release handed the key to this waiter after its attempt
    /// number `handed` (0: none).
    pub(super) handed: AtomicU64,
    /// The fence that hand-off came with (0: none, fencing off).
    pub(super) handed_fence: AtomicI64,
    /// Told of every wake, besides the tasks waiting in [`Place::woken`].
    pub(super) waker: Mutex<Option<Waker>>,
}

impl Place {
    /// Completes when a release notice reaches this waiter (at once if one
    /// already did and was not consumed).
    pub async fn woken(&self) {
        wait_until(&self.notify, || self.woken.swap(false, Ordering::AcqRel)).await
    }

    /// Takes a pending notice: true when one reached this waiter since the last.
    pub fn take_woken(&self) -> bool {
        self.woken.swap(false, Ordering::AcqRel)
    }

    /// Consumes a pending notice, if any (the caller is about to try anyway).
    pub fn consume(&self) {
        self.woken.store(false, Ordering::Release);
    }

    /// Tells `waker` of every wake from now on (at once if one is pending).
    pub fn on_wake(&self, waker: Waker) {
        *base::lock(&self.waker) = Some(waker.clone());
        if self.woken.load(Ordering::Acquire) {
            waker();
        }
    }

    pub(super) fn wake(&self) {
        self.woken.store(true, Ordering::Release);
        self.notify.notify_waiters();
        let waker = base::lock(&self.waker).clone();
        if let Some(waker) = waker {
            waker();
        }
    }
}
