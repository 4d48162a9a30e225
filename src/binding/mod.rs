//! The JavaScript binding: the only code that knows napi. Thin by design; the
//! lock lives in `crate::core`.

#[cfg(feature = "bench-counts")]
mod bench_counts;
mod cancel;
mod client;
mod constants;
mod errors;
mod events;
mod lifetime;
mod lock;
mod lock_view;
mod options;
mod settle;
mod stored;
mod uvloop;

pub use cancel::CancelHandle;
pub use client::NativeClient;
pub use events::{LockErrorInfo, NodeReport};
pub use lock::{
    extend_lock, forget_lock, forget_locks, hand_over_lock, release_lock, HandOverInfo,
};
pub use lock_view::{
    lock_attempts, lock_ended, lock_ending, lock_fence, lock_held, lock_key, lock_keys, lock_loss,
    lock_nodes, lock_remaining, lock_replicas, lock_status, lock_token, lock_ttl, lock_view,
    LockView,
};
pub use options::{
    AcquireKind, AcquireOptions, LockClientOptions, LockInspection, LockStats, SemaphoreCount,
    TlsOptions,
};

/// lockdog's tokio runtime: one worker thread. Every lock operation is a short
/// wait on a socket; a second worker only adds cross-thread wake-ups (measured
/// with `node bench/run.js --scenario 1,2`).
#[napi_derive::module_init]
fn init() {
    crate::core::base::configure();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("lockdog")
        .enable_all()
        .build();
    if let Ok(runtime) = runtime {
        napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
    }
}
