//! How a held lock ends: let go by its caller and released at quorum,
//! handed over, lost (renewals refused) or lapsed (its validity ran out),
//! with what is still its own freed on the nodes; its handle's release and
//! hand-over, and its state's one move from `Held` to how it ended. The
//! release's calls and verdict at quorum are in `at_quorum.rs`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::core::base::{self, later, wait_until};
use crate::core::broken;
use crate::core::engine::at_quorum::{release_until_decided, release_verdict, released_by_caller};
use crate::core::engine::inner::{Event, Inner};
use crate::core::engine::lock::{
    lost, Lock, LockState, Release, Status, HANDED_OVER, HELD, LOST, RELEASED,
};
use crate::core::error::{ErrorCode, LockError, Result};

/// Ends `state` as released in this process, before anything is sent: the
/// watchdog stops renewing it and it no longer counts as held. False when
/// it had already ended (released, lost, handed over or dropped).
pub(crate) fn let_go(inner: &Inner, state: &LockState) -> bool {
    stop_holding(inner, state, state.end_released())
}

/// Ends `state` as handed over: as [`let_go`], and nothing is
/// sent, now or later.
pub(crate) fn hand_over(inner: &Inner, state: &LockState) -> bool {
    stop_holding(inner, state, state.end_handed_over())
}

fn stop_holding(inner: &Inner, state: &LockState, ended: bool) -> bool {
    if !ended {
        return false;
    }
    inner.watchdog.unwatch(state);
    inner.stats.held.fetch_sub(1, Ordering::Relaxed);
    true
}

/// Ends a held lock as lost: notifies once, then releases it everywhere
/// (token-checked, so only what is still ours goes).
pub fn lose(inner: &Arc<Inner>, state: &Arc<LockState>, why: LockError) {
    end_lost(inner, state, why, Cleanup::Release);
}

/// Ends a held lock whose validity ran out as lost, then frees what is
/// still its own at once rather than at its TTL (renewals whose replies
/// were lost may have landed): a token-checked release of each key whose
/// lease is no longer than this lock's `ttl`, the longest its own
/// renewals set (a fair lock's key goes to the next waiter in line). A
/// key continued with a longer lease by a client that adopted the token
/// is left to it.
pub fn lapse(inner: &Arc<Inner>, state: &Arc<LockState>, why: LockError) {
    let cleanup = if broken::cleans_up_lapsed() {
        // Broken on purpose, plain-del: a naive lock cleans up whatever happened.
        Cleanup::Release
    } else {
        Cleanup::Within(state.ttl())
    };
    end_lost(inner, state, why, cleanup);
}

fn end_lost(inner: &Arc<Inner>, state: &Arc<LockState>, why: LockError, cleanup: Cleanup) {
    if broken::swallows_losses() {
        // Broken on purpose: keep believing in the lock and keep renewing.
        state.set_deadline(later(Instant::now(), state.ttl()));
        inner.watchdog.watch(state.clone());
        return;
    }
    if !state.end_lost(why.clone()) {
        return;
    }
    inner.watchdog.unwatch(state);
    inner.stats.lost.fetch_add(1, Ordering::Relaxed);
    inner.stats.held.fetch_sub(1, Ordering::Relaxed);
    inner.emit(Event::Lost {
        id: state.id,
        error: &why,
    });
    state.notify_ended();
    let longest = match cleanup {
        Cleanup::Release => None,
        Cleanup::Within(ttl) => Some(ttl),
    };
    let owned = inner.clone();
    let state = state.clone();
    inner.in_background(async move {
        let answers = release_until_decided(&owned, &state, longest).await;
        let _ = release_verdict(&owned, &state, &answers);
    });
}

/// What follows a loss on the nodes.
enum Cleanup {
    /// A token-checked release.
    Release,
    /// A token-checked release of the keys with no more than this left.
    Within(Duration),
}

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

/// How a lock ends, as its handle asks.
impl Lock {
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
        if !let_go(inner, state) {
            return Ok(Release::NotHeld);
        }
        let answers = release_until_decided(inner, state, None).await;
        // (The notices' reach is not read here: waiters hear by the notice.)
        released_by_caller(inner, state, &answers, None)
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
            Status::Held if hand_over(inner, state) => {
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
}

/// How a lock's state moves from `Held` to how it ended, once.
impl LockState {
    /// Moves from `Held` to `Released`; false if it had already ended.
    pub fn end_released(&self) -> bool {
        let late = Instant::now() >= self.deadline();
        let won = self.end(RELEASED);
        if won {
            self.released_late.store(late, Ordering::Release);
        }
        won
    }

    /// Moves from `Held` to `Released` because its client closes: its holder
    /// is told with the `ERR_LOCK_CLOSED` that [`LockState::ending`] gives;
    /// false if it had already ended.
    pub fn end_closed(&self) -> bool {
        let mut ending = base::lock(&self.ending);
        let won = self.end(RELEASED);
        if won {
            let label = self.label();
            let why =
                format!("lock \"{label}\" was ended: its client was closed while it was held");
            *ending = Some(Box::new(
                LockError::new(crate::core::error::ErrorCode::Closed, why).with_key(label),
            ));
        }
        won
    }

    /// Moves from `Held` to `HandedOver`; false if it had already ended.
    pub fn end_handed_over(&self) -> bool {
        self.end(HANDED_OVER)
    }

    /// The holder's release found its keys gone or another owner's: the
    /// lock, `Released` since the release began, was lost before it (its
    /// validity had run out, or a key went), and keeps why.
    pub fn lost_before_release(&self) -> Option<LockError> {
        let why = if self.released_late.load(Ordering::Acquire) {
            "its validity ran out"
        } else {
            "on release its key was gone or held by another owner"
        };
        let err = lost(&self.label(), why);
        let mut ending = base::lock(&self.ending);
        if ending.is_some() {
            // Its client's close ended it, and its holder was told so.
            return None;
        }
        let moved = self
            .status
            .compare_exchange(RELEASED, LOST, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if !moved {
            return None;
        }
        *ending = Some(Box::new(err.clone()));
        Some(err)
    }

    /// Moves from `Held` to `Lost`, keeping why; false if it had already ended.
    /// Waiters on [`LockState::ended`] are woken by [`LockState::notify_ended`],
    /// once the loss has been counted and reported.
    pub fn end_lost(&self, why: LockError) -> bool {
        let mut ending = base::lock(&self.ending);
        if ending.is_none() && self.status() == Status::Held {
            *ending = Some(Box::new(why));
        }
        drop(ending);
        self.status
            .compare_exchange(HELD, LOST, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    fn end(&self, to: u8) -> bool {
        let won = self
            .status
            .compare_exchange(HELD, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if won {
            self.notify_ended();
        }
        won
    }

    pub fn notify_ended(&self) {
        self.ended_flag.store(true, Ordering::Release);
        self.ended_wake.notify_waiters();
    }

    /// Why the lock was lost, once it was.
    pub fn loss(&self) -> Option<LockError> {
        if self.status() != Status::Lost {
            return None;
        }
        base::lock(&self.ending).as_deref().cloned()
    }

    /// What ended the lock before its holder let go, once it did: its loss
    /// (`ERR_LOCK_LOST`) or its client's close (`ERR_LOCK_CLOSED`).
    pub fn ending(&self) -> Option<LockError> {
        match self.status() {
            Status::Held | Status::HandedOver => None,
            Status::Released | Status::Lost => base::lock(&self.ending).as_deref().cloned(),
        }
    }

    /// Completes when the lock is released or lost.
    pub async fn ended(&self) {
        wait_until(&self.ended_wake, || self.ended_flag.load(Ordering::Acquire)).await
    }
}
