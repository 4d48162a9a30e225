//! The two calls of every lock's life on the JS-loop driver, as plain
//! Node-API functions: taking a lock on one key, and releasing a lock.
//! napi-rs's glue around a `#[napi]` call opens a borrow scope for it (an
//! `Arc`'d registry, and for a method its instance entered in a
//! process-wide map) and converts a key list into a `Vec`; these read
//! their few arguments straight from the call, and a client's acquires
//! that pass the same options resolve them once. What they do not take
//! (several keys, a cancel handle, another kind of lock, a client without
//! this driver) goes through `NativeClient.acquire` and `releaseLock`,
//! which end in the same code.

// napi registers what is here; a unit-test build registers nothing.
#![cfg_attr(test, allow(dead_code))]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use napi::bindgen_prelude::{FromNapiValue, JsObjectValue, Object, ToNapiValue};
use napi::{sys, Env, JsError, JsValue, Status};
use napi_derive::napi;

use super::conn::lookup;
use crate::binding::client::settle_lock;
use crate::binding::errors::to_napi;
use crate::binding::lock::release_lock;
use crate::binding::options::{AcquireOptions, PACKED_LEN};
use crate::core::{self as core, LockError, Request};

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
    for (name, call) in [("acquire", acquire as Entry), ("release", release as Entry)] {
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

/// Runs an entry's body: what it returns, or, thrown, what failed (a panic
/// too, as an error, never across the boundary).
fn run(
    env: sys::napi_env,
    body: impl FnOnce() -> napi::Result<sys::napi_value>,
) -> sys::napi_value {
    let failed = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => return value,
        Ok(Err(e)) => e,
        Err(_) => napi::Error::new(Status::GenericFailure, "lockdog: internal error"),
    };
    unsafe { JsError::from(failed).throw_into(env) };
    ptr::null_mut()
}

/// The call's first `N` arguments (`undefined` past those given).
unsafe fn args<const N: usize>(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> napi::Result<[sys::napi_value; N]> {
    let mut argc = N;
    let mut argv = [ptr::null_mut(); N];
    napi::check_status!(unsafe {
        sys::napi_get_cb_info(
            env,
            info,
            &mut argc,
            argv.as_mut_ptr(),
            ptr::null_mut(),
            ptr::null_mut(),
        )
    })?;
    Ok(argv)
}

fn value_type(env: sys::napi_env, value: sys::napi_value) -> napi::Result<sys::napi_valuetype> {
    let mut kind = 0;
    napi::check_status!(unsafe { sys::napi_typeof(env, value, &mut kind) })?;
    Ok(kind)
}

fn invalid(name: &str, reason: &str) -> napi::Error {
    to_napi(LockError::invalid_value(name, reason)).into()
}

/// A number argument.
fn number(env: sys::napi_env, value: sys::napi_value, name: &str) -> napi::Result<f64> {
    if value_type(env, value)? != sys::ValueType::napi_number {
        return Err(invalid(name, "must be a number"));
    }
    unsafe { f64::from_napi_value(env, value) }
}

/// The packed options: `None` for `undefined` or `null`.
fn packed<'a>(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Option<&'a [f64]>> {
    let kind = value_type(env, value)?;
    if kind == sys::ValueType::napi_undefined || kind == sys::ValueType::napi_null {
        return Ok(None);
    }
    let mut typed = false;
    napi::check_status!(unsafe { sys::napi_is_typedarray(env, value, &mut typed) })?;
    if !typed {
        return Err(invalid("options", "must be packed in a Float64Array"));
    }
    let (mut kind, mut len, mut data) = (0, 0usize, ptr::null_mut());
    let (mut buffer, mut offset) = (ptr::null_mut(), 0usize);
    napi::check_status!(unsafe {
        sys::napi_get_typedarray_info(
            env,
            value,
            &mut kind,
            &mut len,
            &mut data,
            &mut buffer,
            &mut offset,
        )
    })?;
    if kind != sys::TypedarrayType::float64_array {
        return Err(invalid("options", "must be packed in a Float64Array"));
    }
    if len == 0 {
        return Ok(Some(&[]));
    }
    // SAFETY: V8 keeps the array's `len` numbers at `data` for this call.
    Ok(Some(unsafe {
        std::slice::from_raw_parts(data.cast(), len)
    }))
}

/// `acquire(client, key, options)`: see [`hot_calls`].
unsafe extern "C" fn acquire(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    run(env, || {
        let [client, key, options] = unsafe { args::<3>(env, info)? };
        let client = number(env, client, "client")?;
        if client.fract() != 0.0 || !(0.0..9007199254740992.0).contains(&client) {
            return Err(invalid("client", "names no client of this thread"));
        }
        if value_type(env, key)? != sys::ValueType::napi_string {
            return Err(invalid("key", "must be a non-empty string"));
        }
        let key = unsafe { String::from_napi_value(env, key)? };
        let options = packed(env, options)?;
        let napi_env = Env::from_raw(env);
        let fast = lookup(&napi_env, client as usize)
            .map(|(_, fast)| fast)
            .ok_or_else(|| invalid("client", "names no client of this thread"))?;
        let spec = spec_of(&fast, options)?;
        let request = Request::lock_key(&fast.client.inner, key, spec).map_err(to_napi)?;
        let promise = match super::acquire(&napi_env, &fast.client, request, None) {
            Ok(promise) => promise,
            Err(request) => {
                let client = fast.client.clone();
                let cancel = Default::default();
                settle_lock(&napi_env, async move {
                    client.acquire_prepared(request, cancel).await
                })?
            }
        };
        Ok(promise.raw())
    })
}

/// The options `packed` resolved for `fast`'s client: the last ones again
/// when they are the same numbers.
fn spec_of(
    fast: &super::conn::FastClient,
    packed: Option<&[f64]>,
) -> napi::Result<core::AcquireSpec> {
    // Packed in the wrong length: never the last ones (`from_packed` says
    // what is wrong below).
    let numbers: Option<[f64; PACKED_LEN]> = match packed {
        None => Some([0.0; PACKED_LEN]),
        Some(p) => p.try_into().ok(),
    };
    if let (Some(numbers), Some((last, spec))) = (&numbers, &*fast.last_spec.borrow()) {
        if last
            .iter()
            .zip(numbers)
            .all(|(a, b)| a.to_bits() == b.to_bits())
        {
            return Ok(*spec);
        }
    }
    let options = match packed {
        Some(p) => AcquireOptions::from_packed(p).map_err(to_napi)?,
        None => AcquireOptions::default(),
    };
    let spec = options
        .to_core()
        .and_then(|o| fast.client.resolve(&o))
        .map_err(to_napi)?;
    if let Some(numbers) = numbers {
        *fast.last_spec.borrow_mut() = Some((numbers, spec));
    }
    Ok(spec)
}

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
