//! Which runtime runs this addon, as far as the fast path cares: it drives
//! sockets with libuv poll handles on the JS thread's loop, which only Node's
//! own libuv loop serves. Other runtimes that load Node addons export libuv
//! symbols without the loop behind them: Bun aborts the process on
//! `uv_poll_init_socket` ("unsupported uv function"), Deno accepts the poll
//! handle and never runs its callback. Those are told by their identity
//! (`globalThis.Bun` / `globalThis.Deno`, `process.versions.bun` / `.deno`),
//! checked before any libuv function is called; there every operation takes
//! the tokio path.

use std::ffi::CStr;
use std::ptr;
use std::sync::OnceLock;

use napi::sys;

fn ok(status: sys::napi_status) -> bool {
    status == sys::Status::napi_ok
}

/// `name in object`, false when it cannot be read (no getter runs).
unsafe fn has(env: sys::napi_env, object: sys::napi_value, name: &CStr) -> bool {
    let mut found = false;
    ok(sys::napi_has_named_property(
        env,
        object,
        name.as_ptr(),
        &mut found,
    )) && found
}

/// `object[name]` when it is an object.
unsafe fn object_at(
    env: sys::napi_env,
    object: sys::napi_value,
    name: &CStr,
) -> Option<sys::napi_value> {
    if !has(env, object, name) {
        return None;
    }
    let mut value = ptr::null_mut();
    if !ok(sys::napi_get_named_property(
        env,
        object,
        name.as_ptr(),
        &mut value,
    )) {
        return None;
    }
    let mut kind = 0;
    (ok(sys::napi_typeof(env, value, &mut kind)) && kind == sys::ValueType::napi_object)
        .then_some(value)
}

/// Some(true) in Node, Some(false) in a runtime known to lack a libuv loop,
/// None when the globals could not be read (asked again next time).
unsafe fn identify(env: sys::napi_env) -> Option<bool> {
    let mut global = ptr::null_mut();
    if !ok(sys::napi_get_global(env, &mut global)) {
        return None;
    }
    if has(env, global, c"Bun") || has(env, global, c"Deno") {
        return Some(false);
    }
    let versions = object_at(env, global, c"process")
        .and_then(|process| object_at(env, process, c"versions"))?;
    Some(!(has(env, versions, c"bun") || has(env, versions, c"deno")))
}

/// Whether this process's JS event loop is Node's libuv loop, whose poll
/// handles the fast path may use. Decided once per process (the runtime
/// does not change); false when it cannot be told.
pub fn loop_is_libuv(env: sys::napi_env) -> bool {
    static NODE: OnceLock<bool> = OnceLock::new();
    if let Some(&node) = NODE.get() {
        return node;
    }
    match unsafe { identify(env) } {
        Some(node) => *NODE.get_or_init(|| node),
        None => false,
    }
}
