//! A bench build's counters (cargo feature `bench-counts`, never in a
//! release): every heap allocation the addon's Rust code makes, on any
//! thread, read by `bench/counts.js` around a run of lock pairs.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use napi_derive::napi;

/// The system allocator, counting.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static REALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        REALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The counts so far.
#[napi(object)]
pub struct BenchCounts {
    /// Heap allocations (alloc and alloc_zeroed) since the addon loaded.
    pub allocations: f64,
    /// Reallocations (a growing buffer) since the addon loaded.
    pub reallocations: f64,
    /// Bytes the addon's Rust code holds on the heap now (requested sizes).
    pub live_bytes: f64,
}

/// The bench build's counters (this function exists only in a bench build).
#[napi]
pub fn bench_counts() -> BenchCounts {
    BenchCounts {
        allocations: ALLOCATIONS.load(Ordering::Relaxed) as f64,
        reallocations: REALLOCATIONS.load(Ordering::Relaxed) as f64,
        live_bytes: LIVE_BYTES.load(Ordering::Relaxed) as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_allocation_is_counted() {
        let before = bench_counts();
        let boxed = std::hint::black_box(Box::new([7u8; 64]));
        let mut grown = std::hint::black_box(Vec::<u8>::with_capacity(1));
        grown.extend_from_slice(&[1; 100]);
        let after = bench_counts();
        assert!(after.allocations >= before.allocations + 2.0);
        assert!(after.reallocations > before.reallocations);
        drop((boxed, grown));
    }
}
