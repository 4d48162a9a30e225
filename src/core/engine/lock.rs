//! A held lock: the handle a caller holds ([`Lock`]: releases and
//! extensions go through the client it came from) and the shared state it
//! reads ([`LockState`]: token, keys and the local validity deadline on the
//! monotonic clock, read without locks from any thread, e.g.
//! `lock.remaining`). How it ends is in `ending.rs`.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::core::base::{from_us, ms_of, to_us};
use crate::core::engine::ending;
use crate::core::engine::inner::Inner;
use crate::core::error::{LockError, NodeReport, Result};
use crate::core::model::Keys;
use crate::core::model::{LockKind, Token};
use crate::core::ops::Answers;

pub(super) const HELD: u8 = 0;
pub(super) const RELEASED: u8 = 1;
pub(super) const LOST: u8 = 2;
pub(super) const HANDED_OVER: u8 = 3;

/// Where a lock is in its life. Only `Held` can change, and only once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Held,
    Released,
    Lost,
    /// Let go for another client to continue (`hand_over`).
    HandedOver,
}

/// What a holder's release came to.
#[derive(Debug, Clone)]
pub enum Release {
    /// Its keys were ours and are gone now.
    Released,
    /// It had ended before: released, lost, handed over.
    NotHeld,
    /// Its keys were gone or another owner's: it was lost before the
    /// release, and is recorded so; the caller reports this loss.
    Lost(LockError),
}

pub struct LockState {
    pub id: u64,
    /// How many [`Lock`] handles reach it:
    /// at 0 again it is let go (see `Lock`'s `Drop`).
    pub(crate) handles: AtomicUsize,
    /// The keys as stored in Redis: the client's prefix, then the name the
    /// caller gave (see [`LockState::names`]).
    pub keys: Keys,
    prefix_len: usize,
    pub token: Token,
    /// How its keys are given back (set where the token was made).
    pub kind: LockKind,
    pub attempts: u32,
    /// The watchdog stops renewing at this instant (`maxHold`).
    pub hold_until: Option<Instant>,
    pub auto_renew: bool,
    /// The fencing token, when the client hands them out.
    pub fence: Option<i64>,
    /// `waitReplicas`: (replicas, timeout) for each manual extension.
    pub wait_replicas: Option<(u32, Duration)>,
    /// Each node's answer to the last acquisition, extension or release.
    pub answers: Answers,
    /// Replicas that acknowledged the last acquisition or extension; u32::MAX: unknown.
    replicas: AtomicU32,
    ttl_ms: AtomicU64,
    renew_every_ms: AtomicU64,
    deadline_us: AtomicU64,
    /// Bumped by every manual extend, so a renewal sent before it cannot bring
    /// back the lease it replaced.
    generation: AtomicU64,
    /// Held while a PEXPIRE of this lock is in flight (a watchdog renewal or a
    /// manual extend), so they reach Redis one after the other: a renewal sent
    /// with the old TTL can never land after an extend and shorten its lease.
    lease: tokio::sync::Semaphore,
    pub(super) status: AtomicU8,
    /// Set once the lock ended and its end was reported; `ended_wake` wakes its waiters.
    pub(super) ended_flag: AtomicBool,
    pub(super) ended_wake: Notify,
    /// What ended it before its holder let go: the loss (status `Lost`), or
    /// the client's close (status `Released`, see [`LockState::end_closed`]).
    pub(super) ending: Mutex<Option<Box<LockError>>>,
    /// Its validity had run out when its holder released it.
    pub(super) released_late: AtomicBool,
    /// Where the watchdog keeps it (when it is due, µs), `NOT_WATCHED` when
    /// it is not in the schedule; changed under the schedule's lock.
    watch_place: AtomicU64,
}

const NOT_WATCHED: u64 = u64::MAX;

/// A new lock's id: unique in the process (a thread's table of the locks
/// its JS holds has the locks of every client of that thread).
pub fn new_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Holds off renewals of a lock while a PEXPIRE of it is out (see
/// [`LockState::try_lease_guard`]); a lock carries no allocation for it.
pub struct LeaseGuard(Arc<LockState>);

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.0.lease.add_permits(1);
    }
}

/// What [`LockState::new`] needs.
pub struct NewLock {
    pub id: u64,
    pub keys: Keys,
    /// The length of the client's key prefix at the start of each key.
    pub prefix_len: usize,
    pub token: Token,
    pub kind: LockKind,
    pub attempts: u32,
    pub deadline: Instant,
    pub ttl: Duration,
    pub renew_every: Duration,
    pub hold_until: Option<Instant>,
    pub auto_renew: bool,
    pub fence: Option<i64>,
    /// `waitReplicas`: (replicas, timeout) for each acquisition and extension.
    pub wait_replicas: Option<(u32, Duration)>,
    /// The acquisition's answers (filled in by nodes answering late).
    pub answers: Answers,
}

impl crate::core::ops::KeepsAnswers for LockState {
    fn answers(&self) -> &Answers {
        &self.answers
    }
}

impl Drop for LockState {
    fn drop(&mut self) {
        crate::core::base::lock_dropped();
    }
}

impl LockState {
    pub fn new(n: NewLock) -> Self {
        crate::core::base::lock_made();
        LockState {
            id: n.id,
            handles: AtomicUsize::new(0),
            keys: n.keys,
            prefix_len: n.prefix_len,
            token: n.token,
            kind: n.kind,
            attempts: n.attempts,
            hold_until: n.hold_until,
            auto_renew: n.auto_renew,
            fence: n.fence,
            wait_replicas: n.wait_replicas,
            answers: n.answers,
            replicas: AtomicU32::new(u32::MAX),
            ttl_ms: AtomicU64::new(ms_of(n.ttl)),
            renew_every_ms: AtomicU64::new(ms_of(n.renew_every)),
            deadline_us: AtomicU64::new(to_us(n.deadline)),
            generation: AtomicU64::new(0),
            lease: tokio::sync::Semaphore::new(1),
            status: AtomicU8::new(HELD),
            ended_flag: AtomicBool::new(false),
            ended_wake: Notify::new(),
            ending: Mutex::new(None),
            released_late: AtomicBool::new(false),
            watch_place: AtomicU64::new(NOT_WATCHED),
        }
    }

    /// The keys as the caller named them (without the client's prefix).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.keys
            .iter()
            .map(|k| k.get(self.prefix_len..).unwrap_or(k.as_str()))
    }

    /// The names joined for messages: `a, b`.
    pub fn label(&self) -> String {
        self.names().collect::<Vec<_>>().join(", ")
    }

    pub fn status(&self) -> Status {
        match self.status.load(Ordering::Acquire) {
            HELD => Status::Held,
            RELEASED => Status::Released,
            HANDED_OVER => Status::HandedOver,
            _ => Status::Lost,
        }
    }

    /// Held and still inside its validity, by the local monotonic clock.
    pub fn is_held(&self) -> bool {
        self.status() == Status::Held && Instant::now() < self.deadline()
    }

    pub fn deadline(&self) -> Instant {
        from_us(self.deadline_us.load(Ordering::Acquire))
    }

    /// Its place in the watchdog's schedule (see `watchdog.rs`).
    pub(crate) fn watch_place(&self) -> Option<u64> {
        Some(self.watch_place.load(Ordering::Relaxed)).filter(|&at| at != NOT_WATCHED)
    }

    pub(crate) fn set_watch_place(&self, at: u64) {
        self.watch_place.store(at, Ordering::Relaxed);
    }

    pub(crate) fn clear_watch_place(&self) {
        self.watch_place.store(NOT_WATCHED, Ordering::Relaxed);
    }

    pub fn set_deadline(&self, at: Instant) {
        self.deadline_us.store(to_us(at), Ordering::Release);
    }

    /// Validity left (zero once released, lost or expired).
    pub fn remaining(&self) -> Duration {
        if self.status() != Status::Held {
            return Duration::ZERO;
        }
        self.deadline().saturating_duration_since(Instant::now())
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A new lease replaces the old one (manual extend).
    pub fn next_generation(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    pub fn replicas(&self) -> Option<u32> {
        match self.replicas.load(Ordering::Relaxed) {
            u32::MAX => None,
            n => Some(n),
        }
    }

    pub fn set_replicas(&self, n: Option<u32>) {
        self.replicas
            .store(n.unwrap_or(u32::MAX), Ordering::Relaxed);
    }

    /// Waits for any renewal of this lock in flight, then holds off new ones.
    pub async fn lease_guard(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        // Never closed: `None` cannot happen, and would only not hold off.
        self.lease.acquire().await.ok()
    }

    /// The same without waiting: `None` while an extend is in flight.
    pub fn try_lease_guard(self: &Arc<Self>) -> Option<LeaseGuard> {
        self.lease.try_acquire().ok()?.forget();
        Some(LeaseGuard(self.clone()))
    }

    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms.load(Ordering::Relaxed))
    }

    pub fn renew_every(&self) -> Duration {
        Duration::from_millis(self.renew_every_ms.load(Ordering::Relaxed))
    }

    /// A manual extend changes the lease length the watchdog keeps renewing.
    pub fn set_ttl(&self, ttl: Duration, renew_every: Duration) {
        self.ttl_ms.store(ms_of(ttl), Ordering::Relaxed);
        self.renew_every_ms
            .store(ms_of(renew_every), Ordering::Relaxed);
    }

    /// Whether the watchdog may still renew at `now` (auto-renew on, `maxHold` not reached).
    pub fn renewable(&self, now: Instant) -> bool {
        self.auto_renew && self.hold_until.is_none_or(|h| now < h)
    }
}

/// The error a lost lock reports.
pub fn lost(label: &str, reason: &str) -> LockError {
    LockError::new(
        crate::core::error::ErrorCode::Lost,
        format!("lock \"{label}\" was lost: {reason}"),
    )
    .with_key(label)
}

/// A held lock. Cheap to clone; when the last clone is dropped the watchdog
/// stops renewing it (its state counts the handles: the watchdog's own
/// reference to the state is not one).
pub struct Lock {
    state: Arc<LockState>,
    pub(super) inner: Arc<Inner>,
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

    pub(super) fn state(&self) -> &Arc<LockState> {
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

    /// Extends the lease to `ttl` from now (same token) and makes `ttl` the
    /// lease the watchdog keeps renewing. Never recreates a missing key.
    pub async fn extend(&self, ttl: Duration) -> Result<()> {
        crate::core::engine::renew::extend(&self.inner, self.state(), ttl).await
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A plain lock `id` on one key, held for `valid_for` from now.
    pub(crate) fn held_for_test(
        id: u64,
        valid_for: Duration,
        ttl: Duration,
        renew_every: Duration,
    ) -> LockState {
        LockState::new(NewLock {
            id,
            keys: Keys::One("k".into()),
            prefix_len: 0,
            token: "t".into(),
            kind: LockKind::Key,
            attempts: 1,
            deadline: Instant::now() + valid_for,
            ttl,
            renew_every,
            hold_until: None,
            auto_renew: true,
            fence: None,
            wait_replicas: None,
            answers: Answers::default(),
        })
    }
    use crate::core::error::ErrorCode;

    fn state(valid_for: Duration) -> LockState {
        held_for_test(
            1,
            valid_for,
            Duration::from_secs(1),
            Duration::from_millis(333),
        )
    }

    #[test]
    fn a_lock_ends_once() {
        let s = state(Duration::from_secs(1));
        assert!(s.is_held());
        assert!(s.end_lost(LockError::new(ErrorCode::Lost, "gone")));
        assert!(!s.end_released(), "a lost lock cannot be released after");
        assert_eq!(s.status(), Status::Lost);
        assert_eq!(s.loss().map(|e| e.code), Some(ErrorCode::Lost));
        assert_eq!(s.remaining(), Duration::ZERO);
    }

    #[test]
    fn a_lock_its_client_closed_tells_its_holder_so_and_is_never_a_loss() {
        let s = state(Duration::from_secs(5));
        assert!(s.ending().is_none());
        assert!(s.end_closed());
        assert!(!s.end_closed(), "ended once");
        assert_eq!(s.status(), Status::Released);
        let why = s.ending().expect("the close is recorded");
        assert_eq!(why.code, ErrorCode::Closed);
        assert_eq!(why.key.as_deref(), Some("k"));
        assert!(why.message.contains("client was closed while it was held"));
        assert!(s.loss().is_none(), "a close is not a loss");
        // The close's own release finding the key gone changes nothing.
        assert!(s.lost_before_release().is_none());
        assert_eq!(s.status(), Status::Released);
        // A lock released by its holder has no ending to tell.
        let s = state(Duration::from_secs(5));
        assert!(s.end_released());
        assert!(s.ending().is_none());
        assert!(!s.end_closed());
    }

    #[test]
    fn a_release_that_found_the_key_gone_records_the_loss_it_found() {
        let s = state(Duration::from_secs(5));
        assert!(s.end_released());
        let found = s.lost_before_release().expect("released, now lost");
        assert!(
            found.message.contains("on release its key was gone"),
            "{}",
            found.message
        );
        assert_eq!(s.status(), Status::Lost);
        assert_eq!(s.loss().map(|e| e.message), Some(found.message));
        assert!(s.lost_before_release().is_none(), "recorded once");
        // Released after its validity ran out: lost to that.
        let s = state(Duration::ZERO);
        assert!(s.end_released());
        let found = s.lost_before_release().expect("lost");
        assert!(
            found.message.contains("its validity ran out"),
            "{}",
            found.message
        );
        // Handed over: nothing a release finds is a loss of this lock.
        let s = state(Duration::from_secs(5));
        assert!(s.end_handed_over());
        assert_eq!(s.status(), Status::HandedOver);
        assert!(!s.end_released());
        assert!(s.lost_before_release().is_none());
    }

    #[test]
    fn validity_is_local_and_monotonic() {
        let s = state(Duration::from_millis(0));
        assert!(!s.is_held(), "past its deadline a lock is not held");
        let s = state(Duration::from_secs(5));
        assert!(s.remaining() > Duration::from_secs(4));
    }
}
