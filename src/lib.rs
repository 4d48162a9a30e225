//! lockdog: a Redis distributed lock for Node.js.
//! `core` is the lock (no napi); `binding` exposes it to JavaScript.

pub mod binding;
pub mod core;
