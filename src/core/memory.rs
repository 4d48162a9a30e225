//! Giving memory back after a burst. A burst of operations (a `Promise.all`
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
use std::time::Duration;

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
