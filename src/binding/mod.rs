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
mod options;
mod settle;
mod stored;
mod uvloop;

pub use cancel::CancelHandle;
pub use client::NativeClient;
pub use events::{LockErrorInfo, NodeReport};
pub use lock::NativeLock;
pub use options::{
    AcquireKind, AcquireOptions, LockClientOptions, LockInspection, LockStats, SemaphoreCount,
    TlsOptions,
};

/// lockdog's tokio runtime: one worker thread. Every lock operation is a short
/// wait on a socket; a second worker only adds cross-thread wake-ups (measured
/// with `node bench/run.js --scenario 1,2`).
#[napi_derive::module_init]
fn init() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("lockdog")
        .enable_all()
        .build();
    if let Ok(runtime) = runtime {
        napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
    }
}
