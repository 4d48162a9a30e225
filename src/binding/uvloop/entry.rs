//! The two calls of every lock's life on the JS-loop driver, as plain
//! Node-API functions: taking a lock on one key, and releasing a lock.
//! napi-rs's glue around a `#[napi]` call opens a borrow scope for it (an
//! `Arc`'d registry, and for a method its instance entered in a
//! process-wide map) and converts a key list into a `Vec`; these read
//! their few arguments straight from the call, and a client's acquires
//! that pass the same options resolve them once. What they do not take
//! (several keys, a cancel handle, another kind of lock, a client without
//! this driver) goes through `NativeClient.acquire` and `releaseLock`,
//! which end in the same code. Here: `hotCalls()` and the release; the
//! acquire entry is `acquire.rs`'s, beside the acquisition it starts, and
//! the readers of a call's arguments are `reactor.rs`'s.

// napi registers what is here; a unit-test build registers nothing.
#![cfg_attr(test, allow(dead_code))]

use std::ptr;

use napi::bindgen_prelude::{JsObjectValue, Object, ToNapiValue};
use napi::{sys, Env};
use napi_derive::napi;

use super::acquire::hot_acquire;
use super::reactor::{args, number, run};
use crate::binding::lock::release_lock;

/// The JS thread's own `acquire` and `release`: `acquire(client, key,
/// options)` takes the lock on the one string `key` for the client whose
/// `NativeClient.hotKey` is `client`, `options` packed in a `Float64Array`
/// as `packedAcquireOptions()` names them (or `undefined`), and resolves
/// the lock's id, like `NativeClient.acquire`; `release(id)` is
/// `releaseLock(id)`. Bad arguments throw a `LockError`
/// (`ERR_INVALID_ARG_VALUE`).
#[napi(
    ts_return_type = "{ acquire(client: number, key: string, options?: Float64Array): Promise<number>; release(id: number): Promise<boolean | Error> }"
)]
pub fn hot_calls(env: &Env) -> napi::Result<Object<'_>> {
    let raw = env.raw();
    let mut calls = Object::new(env)?;
    for (name, call) in [
        ("acquire", hot_acquire as Entry),
        ("release", release as Entry),
    ] {
        let mut f = ptr::null_mut();
        napi::check_status!(unsafe {
            sys::napi_create_function(
                raw,
                name.as_ptr().cast(),
                name.len() as isize,
                Some(call),
                ptr::null_mut(),
                &mut f,
            )
        })?;
        calls.set_named_property(name, unsafe { napi::Unknown::from_raw_unchecked(raw, f) })?;
    }
    Ok(calls)
}

type Entry = unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;

/// `release(id)`: see [`hot_calls`].
unsafe extern "C" fn release(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    run(env, || {
        let [id] = unsafe { args::<1>(env, info)? };
        let id = number(env, id, "id")?;
        let napi_env = Env::from_raw(env);
        let promise = release_lock(&napi_env, id)?;
        unsafe { ToNapiValue::to_napi_value(env, promise) }
    })
}
