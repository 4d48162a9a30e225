//! A lock is an id in JS: this thread's table of the locks its JS holds,
//! what works on one by its id (release, extend, hand-over, forget), and the
//! promises of lock operations, made and settled on the JS thread (a lock
//! just taken goes into the table as its promise resolves: [`Taken`]).
//! Operations finished on other threads are settled through `settle/`.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ptr;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::binding::errors::{to_napi, ErrorObject, JsResult};
use crate::binding::lock_view::millis;
use crate::binding::settle::settle_later;
use crate::binding::uvloop;
use crate::core::config::lease_millis;
use crate::core::engine::lock::Release;
use crate::core::error::LockError;
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

/// The locks this thread's JS holds, by id: a lock is a number in JS, and
/// its state lives here until JS lets go of it (`forgetLock`, from the
/// `FinalizationRegistry` of `lib/lock.js`) or the environment ends. No JS
/// object of the addon's own per lock (and no reference to one).
type Held = HashMap<u64, Lock, ById>;

/// A table's hasher by an id of [`IdHasher`]'s.
pub type ById = BuildHasherDefault<IdHasher>;

thread_local! {
    static HELD: RefCell<Held> = RefCell::new(Held::default());
}

/// Lock ids are handed out in order: spread over the hash's bits. (Also
/// the hash of the JS thread's tables of its clients and acquisitions, by
/// ids and addresses this process makes.)
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_usize(&mut self, id: usize) {
        self.write_u64(id as u64);
    }
}

/// The id JS passed, as the table's key.
fn key_of(id: f64) -> Result<u64> {
    if id.is_finite() && id >= 1.0 && id.fract() == 0.0 && id <= 9_007_199_254_740_991.0 {
        Ok(id as u64)
    } else {
        Err(to_napi(LockError::invalid_value(
            "id",
            &format!("must be a lock's id. Received {id}"),
        ))
        .into())
    }
}

/// `f` of the lock `id` this thread's JS holds.
pub(super) fn with_lock<T>(id: f64, f: impl FnOnce(&Lock) -> T) -> Result<T> {
    let key = key_of(id)?;
    let out = HELD
        .try_with(|held| held.try_borrow().ok().and_then(|h| h.get(&key).map(f)))
        .ok()
        .flatten();
    out.ok_or_else(|| {
        to_napi(LockError::invalid_value(
            "id",
            &format!("names no lock this thread holds. Received {id}"),
        ))
        .into()
    })
}

/// The lock `id`, to work on outside the table (a release may call back into JS).
fn lock_of(id: f64) -> Result<Lock> {
    with_lock(id, Lock::clone)
}

/// What a lock in the table costs the process, as V8 is told: its native
/// state lives until JS collects its `Lock`, so V8 counts it towards when
/// to collect (locks released by the hundred thousand between collections
/// would otherwise keep their state, ~0.9 KB each, until a collection came
/// for reasons of its own).
const LOCK_BYTES: i64 = 1024;

/// V8 hears of locks made and let go in steps of this many (64 KiB): a
/// call at every acquire costs more than the accuracy is worth.
const TELL_EVERY: i64 = 64;

thread_local! {
    /// Locks made (or, negative, let go) on this thread V8 was not told of yet.
    static UNTOLD: Cell<i64> = const { Cell::new(0) };
}

/// Tells V8 that `locks` more (or, negative, fewer) locks' states live,
/// once they add up to a step.
fn tell_v8(env: sys::napi_env, locks: i64) {
    let now = UNTOLD
        .try_with(|untold| {
            let n = untold.get() + locks;
            let due = n.abs() >= TELL_EVERY;
            untold.set(if due { 0 } else { n });
            if due {
                n
            } else {
                0
            }
        })
        .unwrap_or(locks);
    if now != 0 {
        let mut total = 0;
        // SAFETY: called on the environment's JS thread, in a call from it.
        unsafe { sys::napi_adjust_external_memory(env, now * LOCK_BYTES, &mut total) };
    }
}

/// JS no longer holds the lock `id` (its `Lock` was refused, or the
/// environment ends): its state goes, and a lock still held stops being
/// renewed (its keys expire by TTL).
#[napi]
pub fn forget_lock(env: &Env, id: f64) {
    let gone = forget(&[id]);
    tell_v8(env.raw(), -(gone as i64));
}

/// JS no longer holds these locks (their `Lock`s were collected; the
/// `FinalizationRegistry` of `lib/lock.js` hands them over in one call): as
/// [`forget_lock`] for each.
#[napi]
pub fn forget_locks(env: &Env, ids: Float64Array) {
    let gone = forget(&ids);
    tell_v8(env.raw(), -(gone as i64));
}

/// Takes the locks `ids` out of the table; how many were there.
fn forget(ids: &[f64]) -> usize {
    let gone: Vec<Lock> = HELD
        .try_with(|held| {
            let Ok(mut held) = held.try_borrow_mut() else {
                return Vec::new();
            };
            let gone = ids
                .iter()
                .filter_map(|&id| key_of(id).ok())
                .filter_map(|key| held.remove(&key))
                .collect();
            // A table that held many locks gives its room back as they go.
            if held.capacity() > 4096 && held.len() * 4 < held.capacity() {
                let keep = held.len() * 2;
                held.shrink_to(keep);
            }
            gone
        })
        .unwrap_or_default();
    // Dropped outside the table's borrow.
    let count = gone.len();
    drop(gone);
    count
}

/// Every lock this thread's JS holds goes (its environment ends).
pub fn forget_all() {
    let all = HELD
        .try_with(|held| {
            held.try_borrow_mut()
                .map(|mut h| std::mem::take(&mut *h))
                .ok()
        })
        .ok()
        .flatten();
    drop(all);
}

/// Releases the lock (token-checked, on every node) after stopping its
/// watchdog. Resolves true if it was ours and is now gone, false if it had
/// already been released, lost or handed over, and the `LockError`
/// (`ERR_LOCK_LOST`) of the loss it found when its key was gone or another
/// owner's (the lock is recorded as lost; the caller reports it).
#[napi(ts_return_type = "Promise<boolean | Error>")]
pub fn release_lock<'env>(env: &'env Env, id: f64) -> Result<PromiseRaw<'env, Release>> {
    let lock = lock_of(id)?;
    if let Some(promise) = uvloop::release(env, &lock) {
        return Ok(promise);
    }
    settle_later(env, async move {
        lock.release_reporting().await.map_err(to_napi)
    })
}

/// Lets go of the lock without releasing it: the watchdog stops renewing,
/// the keys keep their lease for another client to `adopt` with the token,
/// and nothing this lock does later deletes them. Throws `ERR_LOCK_LOST`
/// saying why when it was no longer held. Synchronous: no Redis call.
#[napi]
pub fn hand_over_lock(id: f64) -> Result<HandOverInfo> {
    let h = lock_of(id)?.hand_over().map_err(to_napi)?;
    Ok(HandOverInfo {
        key: h.names.first().cloned().unwrap_or_default(),
        keys: h.names,
        token: h.token,
        remaining: millis(h.remaining),
        fence: h.fence.map(|f| f as f64),
    })
}

/// Extends the lease to `ttl` ms from now with the same token; later renewals
/// keep that lease. Never recreates a key that is gone.
#[napi(ts_return_type = "Promise<void>")]
pub fn extend_lock<'env>(env: &'env Env, id: f64, ttl: f64) -> Result<PromiseRaw<'env, ()>> {
    let lock = lock_of(id)?;
    let ttl = lease_millis("ttl", ttl, 1).map_err(to_napi)?;
    if let Some(promise) = uvloop::extend(env, &lock, ttl) {
        return Ok(promise);
    }
    settle_later(env, async move { lock.extend(ttl).await.map_err(to_napi) })
}

/// A new promise of a lock operation, and its deferred.
pub(crate) fn promise(env: sys::napi_env) -> Result<(Deferred, sys::napi_value)> {
    let mut deferred = ptr::null_mut();
    let mut promise = ptr::null_mut();
    check_status!(
        unsafe { sys::napi_create_promise(env, &mut deferred, &mut promise) },
        "napi_create_promise failed"
    )?;
    Ok((Deferred(deferred), promise))
}

/// A promise's settling end; settled once, on the JS thread it came from.
pub(crate) struct Deferred(sys::napi_deferred);

// SAFETY: moved to the thread that finishes the operation, a deferred is
// only used again on the JS thread it came from.
unsafe impl Send for Deferred {}

impl Deferred {
    /// Settles the promise now (on its JS thread): resolved with the value,
    /// or rejected with the failure built as a typed JS error.
    pub fn settle<T: ToNapiValue>(self, env: sys::napi_env, result: JsResult<T>) {
        let value = result.and_then(|v| Ok(unsafe { T::to_napi_value(env, v) }?));
        unsafe {
            match value {
                Ok(value) => sys::napi_resolve_deferred(env, self.0, value),
                Err(failure) => sys::napi_reject_deferred(env, self.0, failure.into_js(env)),
            };
        }
    }
}

/// Settles at once or, when the operation reported events (`in_turn`),
/// after them.
pub(crate) fn finish<T: ToNapiValue + Send + 'static>(
    env: sys::napi_env,
    deferred: Deferred,
    result: JsResult<T>,
    in_turn: bool,
) {
    if in_turn {
        crate::binding::settle::settle_in_turn(env, deferred, result);
    } else {
        deferred.settle(env, result);
    }
}

/// A lock just taken or adopted, as JS gets it: its id, the lock kept in
/// this thread's table until JS lets go of it.
pub struct Taken(pub Lock);

impl ToNapiValue for Taken {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        let id = val.0.id();
        let displaced = HELD
            .try_with(|held| {
                held.try_borrow_mut()
                    .map(|mut h| h.insert(id, val.0))
                    .map_err(|_| ())
            })
            .map_err(|_| ())
            .and_then(|r| r);
        match displaced {
            Ok(old) => drop(old),
            Err(()) => {
                return Err(Error::new(
                    Status::GenericFailure,
                    "the lock table of this thread is gone".to_string(),
                ))
            }
        }
        tell_v8(env, 1);
        unsafe { f64::to_napi_value(env, id as f64) }
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
