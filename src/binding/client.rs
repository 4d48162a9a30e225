use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::binding::cancel::CancelHandle;
use crate::binding::errors::to_napi;
use crate::binding::events::{LockErrorInfo, NodeReport};
use crate::binding::fast;
use crate::binding::lock::NativeLock;
use crate::binding::options::{AcquireOptions, LockClientOptions, LockInspection, LockStats};
use crate::binding::settle::{settle_later, Callback};
use crate::core::{self as core, Event, EventHook};

/// `(kind, lockId, detail)`: `'lost'` with the error, `'error'` with the
/// node's report, `'renewed'` with the count as `lockId` and no detail.
type EventArgs = FnArgs<(String, f64, Option<Either<LockErrorInfo, NodeReport>>)>;
/// The event callback as JS passes it (typed by `ts_arg_type` at its use).
type EventFn<'a> = Function<'a, EventArgs, ()>;

/// The native lock client; `lib/client.js` wraps it in `LockClient`.
#[napi]
pub struct NativeClient {
    pub(crate) core: core::Client,
    renew_events: Arc<AtomicBool>,
}

/// Delivers the core's events to JS; it never keeps Node running.
fn hook(callback: Callback, renew_events: Arc<AtomicBool>) -> EventHook {
    let callback = Arc::new(callback);
    Arc::new(move |event: Event<'_>| {
        let args = match event {
            Event::Lost { id, error } => (
                "lost".to_string(),
                id as f64,
                Some(Either::A(LockErrorInfo::from(error))),
            ),
            Event::Renewed { count } => {
                // Only when someone traces renewals: each call costs the JS thread.
                if !renew_events.load(Ordering::Relaxed) {
                    return;
                }
                ("renewed".to_string(), count as f64, None)
            }
            Event::NodeError { node, answer } => (
                "error".to_string(),
                0.0,
                Some(Either::B(NodeReport::new(node, answer))),
            ),
        };
        callback.call(args.0, args.1, args.2);
    })
}

impl Drop for NativeClient {
    fn drop(&mut self) {
        fast::forget(&self.core);
    }
}

impl NativeClient {
    /// A `waitTimeout` shorter than a node's timeout bounds the first attempt
    /// too: that takes the tokio path, which can stop waiting mid-attempt.
    fn fast_bounds_fit(&self, request: &core::Request) -> bool {
        let spec = request.spec();
        spec.wait_timeout.is_zero()
            || spec.wait_timeout >= self.core.config().node_timeout_for(spec.ttl)
    }
}

#[napi]
impl NativeClient {
    /// Checks the options and parses the node URLs; connects lazily.
    #[napi(constructor)]
    pub fn new(
        env: &Env,
        options: Option<LockClientOptions>,
        #[napi(
            ts_arg_type = "(kind: string, lockId: number, detail: LockErrorInfo | NodeReport | null) => void"
        )]
        on_event: Option<EventFn<'_>>,
    ) -> Result<Self> {
        let cfg = options.unwrap_or_default().to_core().map_err(to_napi)?;
        let renew_events = Arc::new(AtomicBool::new(false));
        let hook = match on_event {
            Some(f) => Some(hook(Callback::new(env, f.raw())?, renew_events.clone())),
            None => None,
        };
        let core = core::Client::new(cfg, hook).map_err(to_napi)?;
        fast::register(env, &core);
        Ok(NativeClient { core, renew_events })
    }

    /// Takes the lock on `keys` as one lock, waiting as the options allow.
    /// Arguments are checked synchronously (the call throws before any I/O).
    #[napi(ts_return_type = "Promise<NativeLock>")]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        keys: Vec<String>,
        options: Option<AcquireOptions>,
        cancel: Option<&CancelHandle>,
    ) -> Result<PromiseRaw<'env, NativeLock>> {
        let opts = options.unwrap_or_default().to_core().map_err(to_napi)?;
        let request = self.core.prepare(keys, &opts).map_err(to_napi)?;
        // The first attempt goes the fast way unless the caller may cancel it
        // or bounds it more tightly than a node's own timeout.
        let request = match cancel {
            None if self.fast_bounds_fit(&request) => {
                match fast::acquire(env, &self.core, Box::new(request)) {
                    Ok(promise) => return Ok(promise),
                    Err(request) => *request,
                }
            }
            _ => request,
        };
        let cancel = cancel.map(|c| c.token.clone()).unwrap_or_default();
        let client = self.core.clone();
        settle_later(env, async move {
            let lock = client
                .acquire_prepared(request, cancel)
                .await
                .map_err(to_napi)?;
            Ok(NativeLock { lock })
        })
    }

    /// Continues the lock on `keys` whose value is `token`: one token-checked
    /// extend to `ttl` on every node (never creating a key), then the watchdog
    /// renews it. Rejects with `ERR_LOCK_LOST` when the keys are gone or hold
    /// another token. Arguments are checked synchronously.
    #[napi(ts_return_type = "Promise<NativeLock>")]
    pub fn adopt<'env>(
        &self,
        env: &'env Env,
        keys: Vec<String>,
        token: String,
        options: Option<AcquireOptions>,
    ) -> Result<PromiseRaw<'env, NativeLock>> {
        let opts = options.unwrap_or_default().to_core().map_err(to_napi)?;
        let request = self
            .core
            .prepare_adopt(keys, &token, &opts)
            .map_err(to_napi)?;
        let client = self.core.clone();
        settle_later(env, async move {
            let lock = client
                .adopt_prepared(request, token)
                .await
                .map_err(to_napi)?;
            Ok(NativeLock { lock })
        })
    }

    /// Reads a lock key on every node without changing it.
    #[napi(ts_return_type = "Promise<LockInspection>")]
    pub fn inspect<'env>(
        &self,
        env: &'env Env,
        key: String,
    ) -> Result<PromiseRaw<'env, LockInspection>> {
        let client = self.core.clone();
        env.spawn_future(async move {
            let found = client.inspect(&key).await.map_err(to_napi)?;
            Ok(LockInspection::from(found))
        })
    }

    /// Deletes the key on every node whoever holds it (unsafe: the holder is not
    /// told). Resolves on how many nodes it existed.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn force_release<'env>(
        &self,
        env: &'env Env,
        key: String,
    ) -> Result<PromiseRaw<'env, u32>> {
        let client = self.core.clone();
        env.spawn_future(async move {
            let n = client.force_release(&key).await.map_err(to_napi)?;
            Ok(u32::try_from(n).unwrap_or(u32::MAX))
        })
    }

    /// Deletes the lock on `keys` wherever they hold `token`, without adopting it.
    /// Resolves each node's answer (`ok` where it held the token). Arguments are
    /// checked synchronously.
    #[napi(ts_return_type = "Promise<Array<NodeReport>>")]
    pub fn release_token<'env>(
        &self,
        env: &'env Env,
        keys: Vec<String>,
        token: String,
    ) -> Result<PromiseRaw<'env, Vec<NodeReport>>> {
        // Keys and token are checked synchronously, as for `adopt`.
        self.core
            .prepare_adopt(keys.clone(), &token, &Default::default())
            .map_err(to_napi)?;
        let client = self.core.clone();
        env.spawn_future(async move {
            let reports = client.release_token(keys, &token).await.map_err(to_napi)?;
            Ok(reports
                .iter()
                .map(|r| NodeReport::new(&r.node, &r.answer))
                .collect())
        })
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

    /// Stops every watchdog, releases every held lock and closes the connections.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        fast::retire(&self.core);
        let client = self.core.clone();
        env.spawn_future(async move {
            client.close().await;
            Ok(())
        })
    }

    /// Whether renewal batches are reported as `'renewed'` events (for tracing).
    #[napi(setter)]
    pub fn set_renew_events(&self, on: bool) {
        self.renew_events.store(on, Ordering::Relaxed);
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
}
