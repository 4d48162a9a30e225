//! What every layer of the core builds on from std and tokio: the monotonic
//! clock as the lock keeps it (instants stored in atomics, deadlines that
//! saturate instead of overflowing, waiting on a condition); std locks taken
//! without skipping work: a guard whose holder panicked is recovered
//! (`into_inner`), since every structure guarded here is consistent between
//! statements (skipping instead would, e.g., leave a lock unwatched, never
//! renewed and never declared lost); and tasks spawned detached.

use std::sync::{
    LazyLock, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

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
}
