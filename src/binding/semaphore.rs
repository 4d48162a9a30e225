//! Semaphore methods of the native client: the same acquire, lock handle and
//! watchdog as locks; `lib/semaphore.js` wraps them in `Semaphore`.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::binding::cancel::CancelHandle;
use crate::binding::client::NativeClient;
use crate::binding::errors::to_napi;
use crate::binding::lock::NativeLock;
use crate::binding::options::AcquireOptions;
use crate::binding::settle::settle_later;
use crate::core::config::whole_number;

/// Permits held in a semaphore, as a quorum of nodes counts them: on one node
/// its count; on several nodes (Redlock) the holders that at least a quorum of
/// nodes record, and their permits.
#[napi(object)]
pub struct SemaphoreCount {
    /// Permits held by holders whose lease has not ended.
    pub permits: u32,
    /// How many holders hold them.
    pub holders: u32,
}

fn count_arg(name: &str, value: f64) -> Result<u32> {
    let n = whole_number(name, value, 0).map_err(to_napi)?;
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}

#[napi]
impl NativeClient {
    /// Takes `permits` of the semaphore `key` that allows `limit` permits at
    /// once, waiting as the options allow; the holder's lease is renewed by the
    /// watchdog like a lock's. Arguments are checked synchronously.
    #[napi(ts_return_type = "Promise<NativeLock>")]
    pub fn acquire_permits<'env>(
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
            .prepare_permits(key, limit, permits, &opts)
            .map_err(to_napi)?;
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

    /// Takes the read-write lock `key` as a reader, or with `write` as its
    /// writer (alone: no reader beside it). A waiting writer holds new readers
    /// off. Renewed by the watchdog like a lock. Arguments are checked synchronously.
    #[napi(ts_return_type = "Promise<NativeLock>")]
    pub fn acquire_rw<'env>(
        &self,
        env: &'env Env,
        key: String,
        write: bool,
        options: Option<AcquireOptions>,
        cancel: Option<&CancelHandle>,
    ) -> Result<PromiseRaw<'env, NativeLock>> {
        let opts = options.unwrap_or_default().to_core().map_err(to_napi)?;
        let request = self.core.prepare_rw(key, write, &opts).map_err(to_napi)?;
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

    /// Takes the lock on `key` fairly: waiters across every process are served
    /// in arrival order through a line kept in Redis (leased places). One node
    /// or a cluster. Arguments are checked synchronously.
    #[napi(ts_return_type = "Promise<NativeLock>")]
    pub fn acquire_fair<'env>(
        &self,
        env: &'env Env,
        key: String,
        options: Option<AcquireOptions>,
        cancel: Option<&CancelHandle>,
    ) -> Result<PromiseRaw<'env, NativeLock>> {
        let opts = options.unwrap_or_default().to_core().map_err(to_napi)?;
        let request = self.core.prepare_fair(key, &opts).map_err(to_napi)?;
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

    /// Counts the permits of the semaphore `key` held by unexpired holders.
    #[napi(ts_return_type = "Promise<SemaphoreCount>")]
    pub fn count_permits<'env>(
        &self,
        env: &'env Env,
        key: String,
    ) -> Result<PromiseRaw<'env, SemaphoreCount>> {
        let client = self.core.clone();
        settle_later(env, async move {
            let c = client.count_permits(&key).await.map_err(to_napi)?;
            Ok(SemaphoreCount {
                permits: c.permits,
                holders: c.holders,
            })
        })
    }
}
