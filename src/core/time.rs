//! The monotonic clock as the lock keeps it: instants stored in atomics,
//! deadlines that saturate instead of overflowing, and waiting on a condition.

use std::sync::LazyLock;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_round_trip_through_micros() {
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
}
