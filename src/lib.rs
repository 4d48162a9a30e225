//! lockdog: a Redis distributed lock for Node.js.
//! `core` is the lock (no napi); `binding` exposes it to JavaScript.

pub mod binding;
pub mod core;

/// The addon's own heap (feature `mimalloc`, which every build of the addon
/// turns on; `cargo test` keeps the system allocator, and a test of its own
/// may bring one): a lock taken and released allocates some fifty small
/// blocks, and with 64 in flight glibc's per-thread cache overflows into its
/// arenas. `node bench/profile/seq-loop.js lockdog URL 3 . 64`, the same
/// build with and without it: 131k and 164k pairs/s, 7.1 and 5.6 µs of the
/// JS thread a pair.
#[cfg(all(feature = "mimalloc", not(feature = "bench-counts")))]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
