//! The native client: its lifecycle, settings and the one acquire entry point
//! (what is taken is an [`AcquireKind`]); `stored.rs` holds its operations on
//! stored keys outside any acquisition.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::binding::cancel::CancelHandle;
use crate::binding::errors::{to_napi, ErrorObject};
use crate::binding::events::node_fault;
use crate::binding::lifetime;
use crate::binding::lock::Taken;
use crate::binding::options::{
    AcquireKind, AcquireOptions, LockClientOptions, LockStats, NodeHealth, NodeRecovered,
};
use crate::binding::settle::{settle_later, Callback};
use crate::binding::uvloop;
use crate::core::{self as core, Event, EventHook};

/// `(kind, number, detail)`: `'lost'` with the lock's id and the loss,
/// `'error'` with the number of identical faults held back before it and the
/// node's fault (both as the `LockError` itself), `'renewed'` with the count
/// and no detail, `'reconnected'` with the ms the node was down and a
/// [`NodeRecovered`].
type EventArgs = FnArgs<(String, f64, Option<ErrorObject>)>;
/// The event callback as JS passes it (typed by `ts_arg_type` at its use).
type EventFn<'a> = Function<'a, EventArgs, ()>;

/// The native lock client; `lib/client.js` wraps it in `LockClient`.
#[napi]
pub struct NativeClient {
    pub(crate) core: core::Client,
    renew_events: Arc<AtomicBool>,
    fast_path: bool,
}

/// Delivers the core's events to JS; it never keeps Node running.
fn hook(callback: Callback, renew_events: Arc<AtomicBool>) -> EventHook {
    let callback = Arc::new(callback);
    Arc::new(move |event: Event<'_>| match event {
        Event::Lost { id, error } => {
            callback.call("lost".into(), id as f64, Some(ErrorObject(error.clone())))
        }
        Event::Renewed { count } => {
            // Only when someone traces renewals: each call costs the JS thread.
            if renew_events.load(Ordering::Relaxed) {
                callback.call("renewed".into(), count as f64, None::<ErrorObject>)
            }
        }
        Event::NodeError {
            node,
            answer,
            repeated,
        } => callback.call(
            "error".into(),
            repeated as f64,
            Some(ErrorObject(node_fault(node, answer))),
        ),
        Event::NodeUp {
            node,
            down_ms,
            faults,
        } => callback.call(
            "reconnected".into(),
            down_ms as f64,
            NodeRecovered {
                node: node.to_string(),
                down_ms: down_ms as f64,
                faults: faults as f64,
            },
        ),
    })
}

/// The promise of a lock being taken on the runtime.
pub(crate) fn settle_lock<'env>(
    env: &'env Env,
    taking: impl Future<Output = core::error::Result<core::Lock>> + Send + 'static,
) -> Result<PromiseRaw<'env, Taken>> {
    settle_later(env, async move {
        let lock = taking.await.map_err(to_napi)?;
        Ok(Taken(lock))
    })
}

impl Drop for NativeClient {
    fn drop(&mut self) {
        uvloop::forget(&self.core);
    }
}

#[napi]
impl NativeClient {
    /// Checks the options and parses the node URLs; connects lazily.
    #[napi(constructor)]
    pub fn new(
        env: &Env,
        options: Option<LockClientOptions>,
        #[napi(ts_arg_type = "(kind: string, lockId: number, detail: Error | null) => void")]
        on_event: Option<EventFn<'_>>,
    ) -> Result<Self> {
        let cfg = options.unwrap_or_default().to_core().map_err(to_napi)?;
        let renew_events = Arc::new(AtomicBool::new(false));
        let hook = match on_event {
            Some(f) => Some(hook(Callback::new(env, f.raw())?, renew_events.clone())),
            None => None,
        };
        let core = core::Client::new(cfg, hook).map_err(to_napi)?;
        let fast_path = uvloop::register(env, &core);
        lifetime::register(env, &core);
        Ok(NativeClient {
            core,
            renew_events,
            fast_path,
        })
    }

    /// Takes what `kind` says on `keys`, waiting as the options allow: without
    /// a kind the lock on every key as one lock; with `limit`, `permits` of
    /// the semaphore on its one key (renewed like a lock); with `write`, the
    /// read-write lock on its one key as its writer (alone) or, with `false`,
    /// a reader (a waiting writer holds new readers off); with `fair`, in
    /// arrival order across every process through a line kept in Redis (one
    /// node or a cluster). Arguments are checked synchronously (the call
    /// throws before any I/O).
    /// `options` as an object, or packed in a `Float64Array` (see
    /// `packedAcquireOptions`).
    #[napi(
        ts_args_type = "keys: Array<string>, options?: AcquireOptions | Float64Array | undefined | null, cancel?: CancelHandle | undefined | null, kind?: AcquireKind | undefined | null",
        ts_return_type = "Promise<number>"
    )]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        keys: Vec<String>,
        options: Option<Unknown<'env>>,
        cancel: Option<&CancelHandle>,
        kind: Option<AcquireKind>,
    ) -> Result<PromiseRaw<'env, Taken>> {
        let kind = kind.unwrap_or_default().to_kind().map_err(to_napi)?;
        let opts = AcquireOptions::read(env, options)?
            .to_core()
            .map_err(to_napi)?;
        let request = kind.prepare(&self.core, keys, &opts).map_err(to_napi)?;
        // Taken on the JS thread's loop where it has one (any kind of lock,
        // on plain masters, once the client's connections there are up).
        let request = match uvloop::acquire(env, &self.core, request, cancel) {
            Ok(promise) => return Ok(promise),
            Err(request) => request,
        };
        let cancel = cancel.map(|c| c.token.clone()).unwrap_or_default();
        let client = self.core.clone();
        settle_lock(env, async move {
            client.acquire_prepared(request, cancel).await
        })
    }

    /// Continues the lock on `keys` whose value is `token`: one token-checked
    /// extend to `ttl` on every node (never creating a key), then the watchdog
    /// renews it. Rejects with `ERR_LOCK_LOST` when the keys are gone or hold
    /// another token. Arguments are checked synchronously.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn adopt<'env>(
        &self,
        env: &'env Env,
        keys: Vec<String>,
        token: String,
        options: Option<AcquireOptions>,
    ) -> Result<PromiseRaw<'env, Taken>> {
        let opts = options.unwrap_or_default().to_core().map_err(to_napi)?;
        let request = self
            .core
            .prepare_adopt(keys, &token, &opts)
            .map_err(to_napi)?;
        let client = self.core.clone();
        settle_lock(
            env,
            async move { client.adopt_prepared(request, token).await },
        )
    }

    /// Resolves once the nodes that operations did not wait for (a quorum had
    /// decided) have answered or timed out, and background cleanups ended.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn settled<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        let client = self.core.clone();
        env.spawn_future(async move {
            client.settled().await;
            Ok(())
        })
    }

    /// The first step of `close()`: from now on new acquisitions and
    /// adoptions reject with ERR_LOCK_CLOSED and those waiting end with it;
    /// held locks stay held (and may be extended) until `close`.
    #[napi]
    pub fn begin_close(&self) {
        self.core.begin_close();
        uvloop::stop_acquiring(&self.core);
    }

    /// Ends the client: every lock still held ends at once with an
    /// ERR_LOCK_CLOSED error (its `ending`), then `ended` is called (before
    /// anything is sent: the holders are told first); the promise resolves
    /// once those locks are released, the background cleanup ended and the
    /// connections closed. An error `ended` throws is thrown after the close
    /// went on.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "() => void")] ended: Option<Function<'env, (), ()>>,
    ) -> Result<PromiseRaw<'env, ()>> {
        uvloop::retire(&self.core);
        let mut told = Ok(());
        let closing = self.core.close_telling(|| {
            if let Some(ended) = ended {
                told = ended.call(());
            }
        });
        let done = env.spawn_future(async move {
            closing.await;
            Ok(())
        });
        told?;
        done
    }

    /// Whether renewal batches are reported as `'renewed'` events (for tracing).
    #[napi(setter)]
    pub fn set_renew_events(&self, on: bool) {
        self.renew_events.store(on, Ordering::Relaxed);
    }

    /// Whether this client's plain operations take the fast path (the JS
    /// thread's own event loop, once its connection is ready); false when
    /// every operation takes the Rust runtime path: `LOCKDOG_FAST_PATH=0`, a
    /// runtime other than Node (Bun, Deno), no libuv exported to addons
    /// (Windows), or nodes it does not serve (TLS, Cluster, Sentinel, `resp3`).
    /// Decided when the client is created.
    #[napi(getter)]
    pub fn fast_path(&self) -> bool {
        self.fast_path
    }

    /// What names this client to `hotCalls().acquire` (on the JS-loop
    /// driver; `null` without it).
    #[napi(getter)]
    pub fn hot_key(&self) -> Option<f64> {
        self.fast_path.then(|| uvloop::hot_key(&self.core))
    }

    /// True once `close()` was called.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.core.is_closed()
    }

    /// `host:port` of each node, in order (never with credentials).
    #[napi(getter)]
    pub fn nodes(&self) -> Vec<String> {
        self.core.node_names()
    }

    /// Counters since the client was created.
    #[napi]
    pub fn stats(&self) -> LockStats {
        self.core.stats().into()
    }

    /// Each node's health, in the order of `nodes`: up, or down (since when,
    /// its last fault) until it answers again.
    #[napi]
    pub fn health(&self) -> Vec<NodeHealth> {
        self.core
            .health()
            .into_iter()
            .map(|(node, status)| NodeHealth::new(node, status))
            .collect()
    }
}
