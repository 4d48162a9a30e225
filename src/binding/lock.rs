use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::binding::errors::{to_napi, ErrorObject};
use crate::binding::events::NodeReport;
use crate::binding::settle::settle_later;
use crate::binding::uvloop;
use crate::core::config::lease_millis;
use crate::core::lock::{Release, Status};
use crate::core::Lock;

/// What a handed-over lock gives the client that continues it with `adopt`.
#[napi(object)]
pub struct HandOverInfo {
    /// The lock's first key, as given (without the client's `keyPrefix`).
    pub key: String,
    /// Every key of the lock, as given.
    pub keys: Vec<String>,
    /// The token to pass to `adopt`.
    pub token: String,
    /// Milliseconds of validity left when it was handed over.
    pub remaining: f64,
    /// The fencing token (client option `fencing`), or null.
    pub fence: Option<f64>,
}

/// A held lock as the native layer sees it; `lib/lock.js` wraps it in `Lock`.
#[napi]
pub struct NativeLock {
    pub(crate) lock: Lock,
}

#[napi]
impl NativeLock {
    /// Identifies the lock in the client's `'lost'` events. A lock just
    /// taken or adopted carries it as an own property too (read without a
    /// call into the addon); this getter answers for the rest.
    #[napi(getter)]
    pub fn id(&self) -> f64 {
        self.lock.id() as f64
    }

    /// The lock's first key, as given (without the client's `keyPrefix`).
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.lock.name().to_string()
    }

    /// Every key this lock holds, as given (without the client's `keyPrefix`).
    #[napi(getter)]
    pub fn keys(&self) -> Vec<String> {
        self.lock.names()
    }

    /// The random value (UUID v4) stored under the key; it proves ownership on
    /// release and renewal.
    #[napi(getter)]
    pub fn token(&self) -> String {
        self.lock.token().to_string()
    }

    /// Milliseconds of validity left by the local monotonic clock (ttl − elapsed −
    /// drift since the last successful renewal); 0 once released, lost or expired.
    /// Synchronous: no Redis call.
    #[napi(getter)]
    pub fn remaining(&self) -> f64 {
        self.lock.remaining().as_secs_f64() * 1000.0
    }

    /// True while the lock is held and within its validity.
    #[napi(getter)]
    pub fn held(&self) -> bool {
        self.lock.is_held()
    }

    /// Each node's answer to the lock's last acquisition, extension or release
    /// (`pending` for a node that had not answered yet; final once the
    /// client's `settled()` resolved).
    #[napi(getter)]
    pub fn nodes(&self) -> Vec<NodeReport> {
        self.lock
            .nodes()
            .iter()
            .map(|n| NodeReport::new(&n.node, &n.answer))
            .collect()
    }

    /// `'held'`, `'released'`, `'lost'` (also once its validity ran out
    /// before the watchdog recorded the loss: its holder counts it as lost
    /// from that instant; and when a release found its key gone or another
    /// owner's) or `'handed-over'`.
    #[napi(getter)]
    pub fn status(&self) -> &'static str {
        match self.lock.status() {
            Status::Held if self.lock.is_held() => "held",
            Status::Held | Status::Lost => "lost",
            Status::Released => "released",
            Status::HandedOver => "handed-over",
        }
    }

    /// True once the lock ended: released, handed over, or lost with the
    /// loss recorded (by the watchdog, or by a release that found it).
    /// False while held, also once its validity ran out unrecorded.
    #[napi(getter)]
    pub fn ended(&self) -> bool {
        self.lock.status() != Status::Held
    }

    /// The lease length in ms that renewals restore.
    #[napi(getter)]
    pub fn ttl(&self) -> f64 {
        self.lock.ttl().as_millis() as f64
    }

    /// The fencing token of this acquisition (client option `fencing`), or null:
    /// strictly larger for every later holder of the key, for as long as the node
    /// keeps its acknowledged writes. Send it with writes and let the resource
    /// refuse older ones.
    #[napi(getter)]
    pub fn fence(&self) -> Option<f64> {
        self.lock.fence().map(|f| f as f64)
    }

    /// How many replicas acknowledged the last acquisition or manual extension
    /// (option `waitReplicas`), or null when not asked for or when `WAIT` failed.
    #[napi(getter)]
    pub fn replicas(&self) -> Option<u32> {
        self.lock.replicas()
    }

    /// How many attempts the acquisition took.
    #[napi(getter)]
    pub fn attempts(&self) -> u32 {
        self.lock.attempts()
    }

    /// Why the lock was lost (also once its validity ran out before the
    /// watchdog recorded it): a new `LockError` (`ERR_LOCK_LOST`) at each
    /// read, or null.
    #[napi(getter, ts_return_type = "Error | null")]
    pub fn loss(&self) -> Option<ErrorObject> {
        let loss = self.lock.loss_now();
        loss.map(ErrorObject)
    }

    /// What ended the lock before its holder let go, once recorded: its loss
    /// (`ERR_LOCK_LOST`) or its client's close (`ERR_LOCK_CLOSED`); a new
    /// `LockError` at each read, or null (also while only the clock tells
    /// that its validity ran out: see `loss`).
    #[napi(getter, ts_return_type = "Error | null")]
    pub fn ending(&self) -> Option<ErrorObject> {
        self.lock.ending().map(ErrorObject)
    }

    /// Releases the lock (token-checked, on every node) after stopping its
    /// watchdog. Resolves true if it was ours and is now gone, false if it had
    /// already been released, lost or handed over, and the `LockError`
    /// (`ERR_LOCK_LOST`) of the loss it found when its key was gone or another
    /// owner's (the lock is recorded as lost; the caller reports it).
    #[napi(ts_return_type = "Promise<boolean | Error>")]
    pub fn release<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Release>> {
        if let Some(promise) = uvloop::release(env, &self.lock) {
            return Ok(promise);
        }
        let lock = self.lock.clone();
        settle_later(env, async move {
            lock.release_reporting().await.map_err(to_napi)
        })
    }

    /// Lets go of the lock without releasing it: the watchdog stops renewing,
    /// the keys keep their lease for another client to `adopt` with the token,
    /// and nothing this lock does later deletes them. Throws `ERR_LOCK_LOST`
    /// saying why when it was no longer held. Synchronous: no Redis call.
    #[napi]
    pub fn hand_over(&self) -> Result<HandOverInfo> {
        let h = self.lock.hand_over().map_err(to_napi)?;
        Ok(HandOverInfo {
            key: h.names.first().cloned().unwrap_or_default(),
            keys: h.names,
            token: h.token,
            remaining: h.remaining.as_secs_f64() * 1000.0,
            fence: h.fence.map(|f| f as f64),
        })
    }

    /// Extends the lease to `ttl` ms from now with the same token; later renewals
    /// keep that lease. Never recreates a key that is gone.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn extend<'env>(&self, env: &'env Env, ttl: f64) -> Result<PromiseRaw<'env, ()>> {
        let ttl = lease_millis("ttl", ttl, 1).map_err(to_napi)?;
        if let Some(promise) = uvloop::extend(env, &self.lock, ttl) {
            return Ok(promise);
        }
        let lock = self.lock.clone();
        settle_later(env, async move { lock.extend(ttl).await.map_err(to_napi) })
    }
}

/// A lock just taken or adopted, as JS gets it: a `NativeLock` with its
/// `id` set on the instance, so that JS reads it without calling back in.
pub struct Taken(pub Lock);

impl ToNapiValue for Taken {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        let id = val.0.id() as f64;
        let object = unsafe { NativeLock::to_napi_value(env, NativeLock { lock: val.0 })? };
        let id = unsafe { f64::to_napi_value(env, id)? };
        let property = sys::napi_property_descriptor {
            utf8name: c"id".as_ptr(),
            name: std::ptr::null_mut(),
            method: None,
            getter: None,
            setter: None,
            value: id,
            attributes: sys::PropertyAttributes::default,
            data: std::ptr::null_mut(),
        };
        check_status!(
            unsafe { sys::napi_define_properties(env, object, 1, &property) },
            "a lock's id"
        )?;
        Ok(object)
    }
}

/// A release's outcome in JS: `true`, `false`, or the loss it found.
impl ToNapiValue for Release {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        match val {
            Release::Released => bool::to_napi_value(env, true),
            Release::NotHeld => bool::to_napi_value(env, false),
            Release::Lost(loss) => ErrorObject::to_napi_value(env, ErrorObject(loss)),
        }
    }
}
