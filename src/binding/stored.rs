//! The native client's operations on stored keys, outside any acquisition:
//! inspect, force-release or release by token a lock key, count a
//! semaphore's permits.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::binding::client::NativeClient;
use crate::binding::errors::to_napi;
use crate::binding::events::NodeReport;
use crate::binding::options::{LockInspection, SemaphoreCount};
use crate::binding::settle::settle_later;

/// What `releaseToken` came to.
#[napi(object)]
pub struct TokenRelease {
    /// A quorum of nodes held the token, and deleted the keys.
    pub released: bool,
    /// Each node's answer.
    pub nodes: Vec<NodeReport>,
}

#[napi]
impl NativeClient {
    /// Reads a lock key on every node without changing it.
    #[napi(ts_return_type = "Promise<LockInspection>")]
    pub fn inspect<'env>(
        &self,
        env: &'env Env,
        key: String,
    ) -> Result<PromiseRaw<'env, LockInspection>> {
        let client = self.core.clone();
        settle_later(env, async move {
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
        settle_later(env, async move {
            let n = client.force_release(&key).await.map_err(to_napi)?;
            Ok(u32::try_from(n).unwrap_or(u32::MAX))
        })
    }

    /// Deletes the lock on `keys` wherever they hold `token`, without adopting it.
    /// Resolves whether a quorum of nodes held it (`released`) and each node's
    /// answer (`ok` where it held the token). Arguments are checked synchronously.
    #[napi(ts_return_type = "Promise<TokenRelease>")]
    pub fn release_token<'env>(
        &self,
        env: &'env Env,
        keys: Vec<String>,
        token: String,
    ) -> Result<PromiseRaw<'env, TokenRelease>> {
        // Keys and token are checked synchronously, as for `adopt`.
        self.core
            .prepare_adopt(keys.clone(), &token, &Default::default())
            .map_err(to_napi)?;
        let client = self.core.clone();
        settle_later(env, async move {
            let done = client.release_token(keys, &token).await.map_err(to_napi)?;
            Ok(TokenRelease {
                released: done.released,
                nodes: done
                    .nodes
                    .iter()
                    .map(|r| NodeReport::new(&r.node, &r.answer))
                    .collect(),
            })
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
            let count = client.count_permits(&key).await.map_err(to_napi)?;
            Ok(SemaphoreCount::from(count))
        })
    }
}
