//! Locking std mutexes without skipping work: a guard whose holder panicked is
//! recovered (`into_inner`), since every structure guarded here is consistent
//! between statements. Skipping instead would, e.g., leave a lock unwatched,
//! never renewed and never declared lost.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

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
