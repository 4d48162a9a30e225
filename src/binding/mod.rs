//! The JavaScript binding: the only code that knows napi. Thin by design; the
//! lock lives in `crate::core`.

mod cancel;
mod client;
mod errors;
mod lock;
mod options;

pub use cancel::CancelHandle;
pub use client::NativeClient;
pub use lock::NativeLock;
pub use options::{AcquireOptions, LockClientOptions, LockStats};
