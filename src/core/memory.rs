//! Giving memory back after a burst. A burst of operations (a `Promise.all`
//! of 100,000 releases) allocates and frees many small blocks; glibc keeps
//! what was freed in its arenas, so the process stays hundreds of MB larger
//! after the burst although lockdog holds none of it. [`give_back`] asks the
//! allocator to return it (`malloc_trim`), on a short-lived thread of its own
//! (never the JS thread) shortly after the burst ended; requests made while
//! one is pending are folded into it. Elsewhere it does nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Operations in flight at once on one connection or JS thread that make a
/// burst worth giving memory back after.
pub const BURST: usize = 4096;

/// How long after the request the memory is given back: what the burst's
/// last replies free meanwhile goes back too.
const SETTLE: Duration = Duration::from_millis(200);

static PENDING: AtomicBool = AtomicBool::new(false);

/// Returns memory freed by a burst to the system, soon and off this thread.
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
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
                unsafe { libc::malloc_trim(0) };
            });
        if spawned.is_err() {
            PENDING.store(false, Ordering::Release);
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = (&PENDING, SETTLE, Ordering::Relaxed);
    }
}

/// The highest number of operations in flight since the last burst ended.
#[derive(Debug, Default, Clone, Copy)]
pub struct Peak(usize);

impl Peak {
    /// `in_flight` operations are out now: once a burst drains, memory goes back.
    pub fn track(&mut self, in_flight: usize) {
        if in_flight > self.0 {
            self.0 = in_flight;
        } else if in_flight == 0 && self.0 >= BURST {
            self.0 = 0;
            give_back();
        } else if in_flight == 0 {
            self.0 = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peak_resets_when_the_burst_drains() {
        let mut p = Peak::default();
        p.track(10);
        p.track(3);
        assert_eq!(p.0, 10);
        p.track(0);
        assert_eq!(p.0, 0);
        p.track(BURST + 1);
        p.track(0);
        assert_eq!(p.0, 0);
    }
}
