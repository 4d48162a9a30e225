//! What a held lock costs the Rust core in heap memory, counted exactly by a
//! counting allocator: the lock's state, its watchdog entry and its handle,
//! marginal over locks already held (so the connection, the runtime and the
//! allocations of a renewal batch are not charged to it).
//!
//! `cargo test --release --test memory -- --nocapture` prints the figure.
//! (Not with the feature `mimalloc`: the library then brings an allocator.)
#![cfg(not(feature = "mimalloc"))]

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use lockdog::core::Client;
use tokio_util::sync::CancellationToken;

use support::{config, opts, RedisServer};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const LOCKS: usize = 5_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_costs_the_core_well_under_a_kibibyte() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let prefix_len = cfg.key_prefix.len();
    let locks = Client::new(cfg, None).expect("valid config");
    // A long ttl: no renewal batch runs while we count.
    let o = opts(600_000);
    let take = |from: usize| {
        let locks = locks.clone();
        let o = o.clone();
        async move {
            let mut held = Vec::with_capacity(LOCKS);
            for i in from..from + LOCKS {
                let lock = locks
                    .acquire(
                        vec![format!("order:{i:06}:pay")],
                        &o,
                        CancellationToken::new(),
                    )
                    .await
                    .expect("acquired");
                held.push(lock);
            }
            held
        }
    };
    let first = take(0).await;
    let mut second_vec: Vec<lockdog::core::Lock> = Vec::with_capacity(LOCKS);
    let before = LIVE.load(Ordering::Relaxed);
    second_vec.extend(take(LOCKS).await);
    let after = LIVE.load(Ordering::Relaxed);
    let per_lock = (after - before) as f64 / LOCKS as f64;
    eprintln!(
        "core heap per held lock: {per_lock:.0} B (key of {} bytes, UUID token, {LOCKS} locks on top of {LOCKS})",
        prefix_len + "order:000000:pay".len()
    );
    assert!(per_lock < 768.0, "{per_lock:.0} B per held lock");
    assert!(
        per_lock > 100.0,
        "the counter sees the locks: {per_lock:.0} B"
    );
    for lock in first.into_iter().chain(second_vec) {
        assert!(lock.release().await.expect("released"));
    }
    locks.close().await;
}
