//! What every layer of the core builds on from std and tokio: the monotonic
//! clock as the lock keeps it (instants stored in atomics, deadlines that
//! saturate instead of overflowing, waiting on a condition); std locks taken
//! without skipping work: a guard whose holder panicked is recovered
//! (`into_inner`), since every structure guarded here is consistent between
//! statements (skipping instead would, e.g., leave a lock unwatched, never
//! renewed and never declared lost); tasks spawned detached; an end that
//! begins once ([`Closing`]); and memory given back after a burst.
//!
//! Memory back after a burst: a burst of operations (a `Promise.all`
//! of 100,000 releases) allocates and frees many small blocks; glibc keeps
//! what was freed in its arenas, so the process stays hundreds of MB larger
//! after the burst although lockdog holds none of it. [`give_back`] asks the
//! allocator to return it (`malloc_trim`), on a short-lived thread of its own
//! (never the JS thread) shortly after the burst ended; requests made while
//! one is pending are folded into it. Elsewhere it does nothing. It is
//! asked when a JS thread's connection drains a burst of replies
//! ([`Peak`]), when the locks alive fall to a quarter of a peak of many
//! (a million locks released and collected), and when a client closes.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{
    LazyLock, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// "Never", as far as a lock is concerned.
const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// An instant as µs since start-up, for atomics: u64 µs reach 584,000 years,
/// past the longest lease (2^53 ms, about 285,000 years).
pub fn to_us(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(*EPOCH).as_micros()).unwrap_or(u64::MAX)
}

pub fn from_us(us: u64) -> Instant {
    later(*EPOCH, Duration::from_micros(us))
}

/// `at + d`, saturating far in the future instead of overflowing: leases may be
/// as long as 2^53 ms, and the core takes any `Duration`.
pub fn later(at: Instant, d: Duration) -> Instant {
    at.checked_add(d)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

/// Whole ms of `d`, saturating.
pub fn ms_of(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Completes once `ready()` is true, checking it again at every wake-up of
/// `notify` (`notify_waiters`); registered before each check, so a wake-up
/// between the check and the wait is never missed.
pub async fn wait_until(notify: &Notify, mut ready: impl FnMut() -> bool) {
    loop {
        let woken = notify.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if ready() {
            return;
        }
        woken.await;
    }
}

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub fn read<T>(m: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(PoisonError::into_inner)
}

pub fn write<T>(m: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `task` on the current tokio runtime, detached. Without one (a JS
/// thread's loop still calling back after the runtime shut down, as its
/// environment ends) the task is dropped: nothing is left to run it, and a
/// panic there would abort the process. False then.
pub fn spawn<F>(task: F) -> bool
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn(task);
            true
        }
        Err(_) => false,
    }
}

/// An end that begins once (a client's `close()`): a plain flag for the
/// checks on every acquisition (a token's own state sits behind a mutex),
/// and a token for what waits and must end then.
#[derive(Default)]
pub struct Closing {
    begun: AtomicBool,
    token: CancellationToken,
}

impl Closing {
    /// It begins: [`Closing::begun`] from now on, and what waits on
    /// [`Closing::cancelled`] ends.
    pub fn begin(&self) {
        self.begun.store(true, Ordering::Release);
        self.token.cancel();
    }

    /// Whether it has begun.
    pub fn begun(&self) -> bool {
        self.begun.load(Ordering::Acquire)
    }

    /// Completes once it has begun.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.token.cancelled()
    }

    /// Its token, for a task that outlives this borrow.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }
}

// Giving memory back.

/// Operations in flight at once on one connection or JS thread that make a
/// burst worth giving memory back after.
pub const BURST: usize = 4096;

/// How long after the request the memory is given back: what the burst's
/// last replies free meanwhile goes back too.
const SETTLE: Duration = Duration::from_millis(200);

static PENDING: AtomicBool = AtomicBool::new(false);

/// mimalloc's `purge_delay` option (its place in `mi_option_t`, mimalloc 2).
#[cfg(feature = "mimalloc")]
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// Its default in mimalloc 2: a page freed goes back 10 ms later, at the
/// allocator's next call.
#[cfg(feature = "mimalloc")]
const MI_PURGE_DELAY_DEFAULT: std::ffi::c_long = 10;

/// Sets the addon's allocator up (feature `mimalloc`): memory a burst freed
/// goes back to the system at once, as glibc's trim gives it back (a client
/// that released a million locks and went idle would otherwise keep most of
/// it). Left as it is when `MIMALLOC_PURGE_DELAY` chose otherwise, or when
/// the option does not read as mimalloc 2's default.
pub fn configure() {
    #[cfg(feature = "mimalloc")]
    // SAFETY: reading and setting an option is thread-safe in mimalloc.
    unsafe {
        if libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) == MI_PURGE_DELAY_DEFAULT {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
        }
    }
}

/// Returns memory freed by a burst to the system, soon and off this thread.
pub fn give_back() {
    // mimalloc keeps each thread's freed pages in that thread's heap: this
    // thread's (a JS thread after a burst or a close) goes back here.
    // SAFETY: mi_collect may be called from any thread at any time.
    #[cfg(feature = "mimalloc")]
    {
        unsafe { libmimalloc_sys::mi_collect(true) };
    }
    #[cfg(any(all(target_os = "linux", target_env = "gnu"), feature = "mimalloc"))]
    {
        if PENDING.swap(true, Ordering::AcqRel) {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("lockdog-trim".into())
            .spawn(|| {
                std::thread::sleep(SETTLE);
                PENDING.store(false, Ordering::Release);
                // SAFETY: malloc_trim only walks the allocator's own arenas, under their locks.
                #[cfg(all(target_os = "linux", target_env = "gnu"))]
                unsafe {
                    libc::malloc_trim(0)
                };
                // The addon's own heap (mimalloc): what its threads freed goes
                // back now rather than at their next allocations.
                // SAFETY: mi_collect may be called from any thread at any time.
                #[cfg(feature = "mimalloc")]
                unsafe {
                    libmimalloc_sys::mi_collect(true)
                };
            });
        if spawned.is_err() {
            PENDING.store(false, Ordering::Release);
        }
    }
    #[cfg(not(any(all(target_os = "linux", target_env = "gnu"), feature = "mimalloc")))]
    {
        let _ = (&PENDING, SETTLE, Ordering::Relaxed);
    }
}

/// Locks alive in the process (held, or ended and not yet dropped), and the
/// most alive since memory was last given back.
static LOCKS: AtomicUsize = AtomicUsize::new(0);
static LOCKS_PEAK: AtomicUsize = AtomicUsize::new(0);

/// A lock's state was made.
pub fn lock_made() {
    let now = LOCKS.fetch_add(1, Ordering::Relaxed) + 1;
    LOCKS_PEAK.fetch_max(now, Ordering::Relaxed);
}

/// A lock's state was dropped: once the locks alive fall to a quarter of a
/// peak of many (a million locks released and collected), what they took
/// goes back. A steady coming and going of locks never gives back.
pub fn lock_dropped() {
    let now = LOCKS.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
    let peak = LOCKS_PEAK.load(Ordering::Relaxed);
    if peak >= BURST
        && now.saturating_mul(4) <= peak
        && LOCKS_PEAK
            .compare_exchange(peak, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        give_back();
    }
}

/// The highest number of operations in flight since the last burst ended.
#[derive(Debug, Default, Clone, Copy)]
pub struct Peak(usize);

impl Peak {
    /// `in_flight` operations are out now: once a burst drains, memory goes
    /// back ([`give_back`]), and true tells the caller to shrink what grew.
    pub fn track(&mut self, in_flight: usize) -> bool {
        if in_flight > self.0 {
            self.0 = in_flight;
            false
        } else if in_flight == 0 {
            let burst = self.0 >= BURST;
            self.0 = 0;
            if burst {
                give_back();
            }
            burst
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn instants_round_trip_through_micros() {
        // The epoch is set at first use: an instant from before it reads as the epoch.
        to_us(Instant::now());
        let now = Instant::now();
        let back = from_us(to_us(now));
        assert!(back <= now && now - back < Duration::from_micros(1));
        let far = later(now, Duration::from_millis((1 << 53) - 1));
        assert_eq!(to_us(far) / 1000, to_us(now) / 1000 + (1 << 53) - 1);
    }

    #[test]
    fn nothing_overflows() {
        let now = Instant::now();
        assert!(later(now, Duration::MAX) > now);
        assert_eq!(ms_of(Duration::MAX), u64::MAX);
        assert_eq!(ms_of(Duration::from_millis(7)), 7);
    }

    #[test]
    fn a_closing_begins_once_and_ends_what_waits_on_it() {
        let closing = Closing::default();
        let token = closing.token();
        assert!(!closing.begun() && !token.is_cancelled());
        closing.begin();
        closing.begin();
        assert!(closing.begun() && token.is_cancelled());
        let rt = tokio::runtime::Builder::new_current_thread().build();
        let rt = rt.expect("a runtime");
        rt.block_on(closing.cancelled());
    }

    #[test]
    fn without_a_runtime_a_task_is_dropped_not_a_panic() {
        let dropped = Arc::new(());
        let held = dropped.clone();
        assert!(!spawn(async move { drop(held) }));
        assert_eq!(Arc::strong_count(&dropped), 1, "the task was dropped");
    }

    #[test]
    fn a_poisoned_mutex_still_gives_its_data() {
        let m = Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = m2.lock();
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
    }

    #[test]
    fn a_peak_resets_when_the_burst_drains() {
        let mut p = Peak::default();
        assert!(!p.track(10));
        assert!(!p.track(3));
        assert_eq!(p.0, 10);
        assert!(!p.track(0), "not a burst");
        assert_eq!(p.0, 0);
        assert!(!p.track(BURST + 1));
        assert!(!p.track(5));
        assert!(p.track(0), "a burst drained");
        assert_eq!(p.0, 0);
    }
}
