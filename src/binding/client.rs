use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use crate::binding::cancel::CancelHandle;
use crate::binding::errors::to_napi;
use crate::binding::lock::NativeLock;
use crate::binding::options::{AcquireOptions, LockClientOptions, LockStats};
use crate::core::{self as core, Event, EventHook};

/// `(kind, lockId, payload)`: `'lost'` with the error as JSON, or `'error'` with
/// `{ node, answer, detail }` as JSON. Weak: it never keeps Node running.
type EventCallback = ThreadsafeFunction<
    FnArgs<(String, f64, String)>,
    (),
    FnArgs<(String, f64, String)>,
    Status,
    false,
    true,
>;

/// The native lock client; `index.js` wraps it in `LockClient`.
#[napi]
pub struct NativeClient {
    core: core::Client,
}

fn hook(callback: EventCallback) -> EventHook {
    let callback = Arc::new(callback);
    Arc::new(move |event: Event<'_>| {
        let args = match event {
            Event::Lost { id, error } => ("lost".to_string(), id as f64, error.to_json()),
            Event::NodeError { node, answer } => (
                "error".to_string(),
                0.0,
                serde_json::json!({
                    "node": node,
                    "answer": answer.kind(),
                    "detail": answer.to_string(),
                })
                .to_string(),
            ),
        };
        callback.call(args.into(), ThreadsafeFunctionCallMode::NonBlocking);
    })
}

#[napi]
impl NativeClient {
    /// Checks the options and parses the node URLs; connects lazily.
    #[napi(constructor)]
    pub fn new(
        options: Option<LockClientOptions>,
        #[napi(ts_arg_type = "(kind: string, lockId: number, payload: string) => void")]
        on_event: Option<EventCallback>,
    ) -> Result<Self> {
        let cfg = options.unwrap_or_default().to_core().map_err(to_napi)?;
        let core = core::Client::new(cfg, on_event.map(hook)).map_err(to_napi)?;
        Ok(NativeClient { core })
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
        let cancel = cancel.map(|c| c.token.clone()).unwrap_or_default();
        let client = self.core.clone();
        env.spawn_future(async move {
            let lock = client
                .acquire_prepared(request, cancel)
                .await
                .map_err(to_napi)?;
            Ok(NativeLock { lock })
        })
    }

    /// Stops every watchdog, releases every held lock and closes the connections.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        let client = self.core.clone();
        env.spawn_future(async move {
            client.close().await;
            Ok(())
        })
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
