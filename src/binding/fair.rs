//! Fair semaphores and read-write locks: their waiters across every process
//! are served in arrival order; `lib/semaphore.js` and `lib/rwlock.js` call
//! these when `fair` is set.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::binding::cancel::CancelHandle;
use crate::binding::client::NativeClient;
use crate::binding::errors::to_napi;
use crate::binding::lock::NativeLock;
use crate::binding::options::AcquireOptions;
use crate::binding::settle::settle_later;
use crate::core::config::whole_number;
use crate::core::Request;

fn count_arg(name: &str, value: f64) -> Result<u32> {
    let n = whole_number(name, value, 0).map_err(to_napi)?;
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}

impl NativeClient {
    fn acquire_request<'env>(
        &self,
        env: &'env Env,
        request: Request,
        cancel: Option<&CancelHandle>,
    ) -> Result<PromiseRaw<'env, NativeLock>> {
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
}

#[napi]
impl NativeClient {
    /// Takes `permits` of the semaphore `key` (at most `limit` at once) in
    /// arrival order across every process: the permits are taken only when
    /// they fit beside those of every earlier waiter in a line kept in Redis
    /// (leased places). One node or a cluster. Arguments are checked synchronously.
    #[napi(ts_return_type = "Promise<NativeLock>")]
    pub fn acquire_fair_permits<'env>(
        &self,
        env: &'env Env,
        key: String,
        limit: f64,
        permits: f64,
        options: Option<AcquireOptions>,
        cancel: Option<&CancelHandle>,
    ) -> Result<PromiseRaw<'env, NativeLock>> {
        let limit = count_arg("limit", limit)?;
        let permits = count_arg("permits", permits)?;
        let opts = options.unwrap_or_default().to_core().map_err(to_napi)?;
        let request = self
            .core
            .prepare_fair_permits(key, limit, permits, &opts)
            .map_err(to_napi)?;
        self.acquire_request(env, request, cancel)
    }

    /// Takes the read-write lock `key` as a reader, or with `write` as its
    /// writer, in arrival order across every process: readers at the head of
    /// the line enter together, a writer alone once those before it are done.
    /// One node or a cluster. Arguments are checked synchronously.
    #[napi(ts_return_type = "Promise<NativeLock>")]
    pub fn acquire_fair_rw<'env>(
        &self,
        env: &'env Env,
        key: String,
        write: bool,
        options: Option<AcquireOptions>,
        cancel: Option<&CancelHandle>,
    ) -> Result<PromiseRaw<'env, NativeLock>> {
        let opts = options.unwrap_or_default().to_core().map_err(to_napi)?;
        let request = self
            .core
            .prepare_fair_rw(key, write, &opts)
            .map_err(to_napi)?;
        self.acquire_request(env, request, cancel)
    }
}
