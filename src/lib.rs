//! lockdog: a Redis distributed lock for Node.js.
//! `core` is the lock (no napi); `binding` exposes it to JavaScript.

pub mod binding;
pub mod core;

/// The addon's own heap: mimalloc 2 (feature `mimalloc`, which every build
/// of the addon turns on; `cargo test` keeps the system allocator, and a test
/// of its own may bring one). A lock taken and released allocates some fifty
/// small blocks, and with 64 in flight glibc's per-thread cache overflows
/// into its arenas. `node bench/profile/seq-loop.js lockdog URL 3 . 64`, the
/// same commit built with and without it: 141k and 168k pairs/s, 6.9 and
/// 5.6 µs of the JS thread a pair (docs/performance.md, "The allocator").
#[cfg(all(feature = "mimalloc", not(feature = "bench-counts")))]
#[global_allocator]
static ALLOC: heap::Heap = heap::Heap;

/// mimalloc as the global allocator, taking its plain entry points for what
/// their alignment covers (nearly every block: `mimalloc::MiMalloc` asks for
/// every block by its aligned ones, a dozen instructions more each).
#[cfg(all(feature = "mimalloc", not(feature = "bench-counts")))]
mod heap {
    use std::alloc::{GlobalAlloc, Layout};
    use std::ffi::c_void;

    use libmimalloc_sys as mi;

    /// What `mi_malloc` aligns every block of at least this size to (x86-64,
    /// aarch64: `MI_MAX_ALIGN_SIZE`).
    const PLAIN_ALIGN: usize = 16;

    /// A block `mi_malloc` aligns as `layout` asks (as std's own allocator
    /// decides for `malloc`).
    fn plain(layout: &Layout) -> bool {
        layout.align() <= PLAIN_ALIGN && layout.align() <= layout.size()
    }

    pub struct Heap;

    // SAFETY: every block comes from mimalloc, aligned as its layout asks
    // (`plain` or the aligned entry points), and goes back to it.
    unsafe impl GlobalAlloc for Heap {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            if plain(&layout) {
                unsafe { mi::mi_malloc(layout.size()) as *mut u8 }
            } else {
                unsafe { mi::mi_malloc_aligned(layout.size(), layout.align()) as *mut u8 }
            }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            if plain(&layout) {
                unsafe { mi::mi_zalloc(layout.size()) as *mut u8 }
            } else {
                unsafe { mi::mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8 }
            }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
            unsafe { mi::mi_free(ptr as *mut c_void) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let grown = Layout::from_size_align(new_size, layout.align());
            if plain(&layout) && grown.as_ref().is_ok_and(plain) {
                unsafe { mi::mi_realloc(ptr as *mut c_void, new_size) as *mut u8 }
            } else {
                unsafe {
                    mi::mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align()) as *mut u8
                }
            }
        }
    }
}
