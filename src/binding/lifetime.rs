//! A client lives no longer than the JS environment that made it: when a
//! worker thread is terminated or exits, or the process exits, every client
//! created there is closed: its watchdog stops, the locks it holds are
//! released (as by `close()`, while the runtime lives on for other threads)
//! or expire by TTL, an acquisition still in flight that completes
//! afterwards gives its lock back, and its connections close. Nothing of a
//! gone environment is renewed.

use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use napi::bindgen_prelude::within_runtime_if_available;
use napi::{sys, Env};

use crate::binding::uvloop;
use crate::core::{self as core, WeakClient};

/// The clients made in each environment of this thread.
struct Made {
    env: sys::napi_env,
    clients: Vec<WeakClient>,
}

thread_local! {
    static MADE: RefCell<Vec<Made>> = const { RefCell::new(Vec::new()) };
}

/// Environments (on any thread) that made a client and still live. The
/// runtime outlives an environment only while another one uses the addon.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Ties `client` to the environment it was made in.
pub fn register(env: &Env, client: &core::Client) {
    let env = env.raw();
    let _ = MADE.try_with(|made| {
        let Ok(mut made) = made.try_borrow_mut() else {
            return;
        };
        if let Some(m) = made.iter_mut().find(|m| m.env == env) {
            m.clients.retain(|c| c.upgrade().is_some());
            m.clients.push(client.downgrade());
            return;
        }
        let hooked = unsafe { sys::napi_add_env_cleanup_hook(env, Some(torn_down), env.cast()) };
        if hooked == sys::Status::napi_ok {
            LIVE.fetch_add(1, Ordering::AcqRel);
            made.push(Made {
                env,
                clients: vec![client.downgrade()],
            });
        }
    });
}

/// The environment ends: every client still alive that it made closes.
unsafe extern "C" fn torn_down(arg: *mut c_void) {
    let env: sys::napi_env = arg.cast();
    let clients = MADE
        .try_with(|made| {
            let mut made = made.try_borrow_mut().ok()?;
            let i = made.iter().position(|m| m.env == env)?;
            Some(made.swap_remove(i).clients)
        })
        .ok()
        .flatten()
        .unwrap_or_default();
    // The last environment using the addon takes the runtime down with it
    // (napi-rs shuts it down): a release sent now would be cut off midway.
    let runtime_stays = LIVE.fetch_sub(1, Ordering::AcqRel) > 1;
    for client in clients.iter().filter_map(WeakClient::upgrade) {
        uvloop::abandon(&client);
        let handle = within_runtime_if_available(tokio::runtime::Handle::try_current);
        match handle {
            // close() stops the watchdog at once and gives every lock back;
            // an acquisition that completes later finds the client closed and
            // releases what it took.
            Ok(runtime) if runtime_stays => {
                runtime.spawn(async move { client.close().await });
            }
            // No renewal, no connection left; the keys expire by TTL.
            _ => within_runtime_if_available(|| client.abandon()),
        }
    }
    // The locks its JS held go with it (each ended by its client's close).
    within_runtime_if_available(crate::binding::lock::forget_all);
}
