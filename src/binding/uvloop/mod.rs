//! The fast path's JS-thread half: each plain node's socket is polled by
//! libuv on the JS thread's own event loop, commands are written inside the
//! napi call, replies are parsed in the poll callback and promises settled
//! there: no thread hop. Connections open on a thread of their own and are
//! handed over once ready; an acquisition's commands wait for them (one that
//! cannot open is an outage to the acquisition), a release or an extend
//! finding none takes the tokio path. State is per JS thread (workers have
//! their own loops).
//!
//! `reactor` holds a thread's loop and deadline timer (and reads the
//! arguments of the thread's own calls), `setup` makes it and tears it down
//! (and finds libuv's functions in the process), `conn` each client's
//! connections at work (a node's slot, a connection's poll handle),
//! `clients` how they are made and unmade, `acquire` an acquisition's
//! promise and its wakes (and `hotCalls().acquire`, which starts one),
//! `waiting` the acquisitions that wait and what wakes them, `entry`
//! `hotCalls()` and its release, `ops` release's and extend's promises (the
//! operations themselves are `core::drivers::uvloop`'s), and `runtime` tells
//! Node's own loop from the runtimes that only mimic it.

#[cfg(unix)]
mod acquire;
#[cfg(unix)]
mod clients;
#[cfg(unix)]
mod conn;
#[cfg(unix)]
mod entry;
#[cfg(unix)]
mod ops;
#[cfg(unix)]
mod reactor;
#[cfg(unix)]
mod runtime;
#[cfg(unix)]
mod setup;
#[cfg(unix)]
mod waiting;

#[cfg(unix)]
pub use acquire::acquire;
#[cfg(unix)]
pub use clients::{abandon, forget, hot_key, register, retire, stop_acquiring};
#[cfg(unix)]
pub use ops::{extend, release};

#[cfg(not(unix))]
mod off {
    //! No fast path here: every operation takes the tokio path.
    use napi::bindgen_prelude::PromiseRaw;
    use napi::Env;

    use crate::binding::lock::Taken;
    use crate::core::{self as core, Lock, Request};

    pub fn register(_: &Env, _: &core::Client) -> bool {
        false
    }
    pub fn forget(_: &core::Client) {}
    pub fn hot_key(_: &core::Client) -> f64 {
        0.0
    }
    pub fn abandon(_: &core::Client) {}
    pub fn retire(_: &core::Client) {}
    pub fn stop_acquiring(_: &core::Client) {}
    pub fn acquire<'env>(
        _: &'env Env,
        _: &core::Client,
        request: Request,
        _: Option<&crate::binding::cancel::CancelHandle>,
    ) -> Result<PromiseRaw<'env, Taken>, Request> {
        Err(request)
    }
    pub fn release<'env>(
        _: &'env Env,
        _: &Lock,
    ) -> Option<PromiseRaw<'env, crate::core::engine::lock::Release>> {
        None
    }
    pub fn extend<'env>(
        _: &'env Env,
        _: &Lock,
        _: std::time::Duration,
    ) -> Option<PromiseRaw<'env, ()>> {
        None
    }
}

#[cfg(not(unix))]
pub use off::{abandon, acquire, extend, forget, register, release, retire, stop_acquiring};
