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
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
