//! One acquisition's options, checked into the core's (`Infinity` and -1
//! mean "no limit" where JS callers use them).

use std::time::Duration;

use napi_derive::napi;

use crate::core::config::{self, lease_millis, millis, whole_number};
use crate::core::{self as core, LockError};

/// Settings of one acquisition; unset fields take the client's defaults.
#[napi(object, object_to_js = false)]
#[derive(Default)]
pub struct AcquireOptions {
    /// Lease length in ms (1 ..= `Number.MAX_SAFE_INTEGER`). The default value is the client's `ttl` (30000).
    pub ttl: Option<f64>,
    /// Retries after the first attempt while the lock is held by another owner or
    /// its nodes are unreachable (`Infinity` or -1: no limit but `waitTimeout`).
    /// With a count, the wait ends after about retryCount × (retryDelay +
    /// retryJitter). The default value is `Infinity`.
    pub retry_count: Option<f64>,
    /// Pause between attempts, in ms, plus 0..retryJitter: the holder's release
    /// notice (Redis pub/sub) ends it early for the first waiter of a key, and it
    /// never outlasts the holder's remaining TTL. Without a `retryCount`, a waiter
    /// that hears the key's release notices waits for one (or the lease's end)
    /// instead. The default value is 100.
    pub retry_delay: Option<f64>,
    /// Random extra pause of 0..retryJitter ms per attempt. The default value is 100.
    pub retry_jitter: Option<f64>,
    /// Longest total wait in ms (`Infinity`: about 24.8 days, the longest timer);
    /// then the acquire rejects with `ERR_LOCK_TIMEOUT` (held by another), or with
    /// the outage's own error (`ERR_LOCK_CONNECTION`, `ERR_LOCK_QUORUM`,
    /// `ERR_LOCK_REDIS`). The default value is 10000.
    pub wait_timeout: Option<f64>,
    /// Longest time the watchdog keeps this lock alive, in ms; then it lapses and
    /// `lock.signal` aborts with `ERR_LOCK_LOST`. The default value is no limit.
    pub max_hold: Option<f64>,
    /// Renewal period in ms. The default value is `ttl / 3`.
    pub renew_interval: Option<f64>,
    /// Whether the native watchdog renews this lock. The default value is `true`.
    pub auto_renew: Option<bool>,
    /// Smallest validity (ms) an acquisition may come back with; an attempt that
    /// leaves less counts as failed. The default value is 1.
    pub min_validity: Option<f64>,
    /// Replicas that should acknowledge this acquisition and its manual extensions
    /// (Redis `WAIT`, on a connection of its own; one master with replicas only).
    /// Best effort: the lock is granted either way and `lock.replicas` tells how
    /// many acknowledged. The default value is 0 (no wait).
    pub wait_replicas: Option<f64>,
    /// Longest wait for those acknowledgements, in ms (shorter than ttl). The default value is 100.
    pub wait_replicas_timeout: Option<f64>,
}

pub(super) fn opt_millis(
    name: &str,
    v: Option<f64>,
    min: u64,
) -> Result<Option<Duration>, LockError> {
    v.map(|v| millis(name, v, min)).transpose()
}

fn opt_lease(name: &str, v: Option<f64>, min: u64) -> Result<Option<Duration>, LockError> {
    v.map(|v| lease_millis(name, v, min)).transpose()
}

/// `Infinity` as the longest wait a timer can express.
fn infinite_as_max(v: f64) -> f64 {
    if v == f64::INFINITY {
        config::MAX_MS as f64
    } else {
        v
    }
}

/// `Infinity` and -1 mean "no limit".
fn retry_count(v: Option<f64>) -> Result<Option<Option<u32>>, LockError> {
    match v {
        None => Ok(None),
        Some(v) if v == f64::INFINITY || v == -1.0 => Ok(Some(None)),
        Some(v) => {
            let n = whole_number("retryCount", v, 0)?;
            Ok(Some(Some(u32::try_from(n).unwrap_or(u32::MAX))))
        }
    }
}

fn max_hold(v: Option<f64>) -> Result<Option<Option<Duration>>, LockError> {
    match v {
        None => Ok(None),
        Some(v) if v == f64::INFINITY => Ok(Some(None)),
        Some(v) => lease_millis("maxHold", v, 1).map(|d| Some(Some(d))),
    }
}

impl AcquireOptions {
    pub fn to_core(&self) -> Result<core::AcquireOptions, LockError> {
        let o = core::AcquireOptions {
            ttl: opt_lease("ttl", self.ttl, 1)?,
            retry_count: retry_count(self.retry_count)?,
            retry_delay: opt_millis("retryDelay", self.retry_delay, 0)?,
            retry_jitter: opt_millis("retryJitter", self.retry_jitter, 0)?,
            wait_timeout: opt_millis("waitTimeout", self.wait_timeout.map(infinite_as_max), 0)?,
            max_hold: max_hold(self.max_hold)?,
            renew_interval: opt_lease("renewInterval", self.renew_interval, 1)?,
            auto_renew: self.auto_renew,
            min_validity: opt_lease("minValidity", self.min_validity, 1)?,
            wait_replicas: self
                .wait_replicas
                .map(|v| {
                    whole_number("waitReplicas", v, 0).and_then(|n| {
                        u32::try_from(n).map_err(|_| {
                            LockError::out_of_range("waitReplicas", "at most 4294967295", v)
                        })
                    })
                })
                .transpose()?,
            wait_replicas_timeout: opt_millis(
                "waitReplicasTimeout",
                self.wait_replicas_timeout,
                1,
            )?,
        };
        o.validate()?;
        Ok(o)
    }
}
