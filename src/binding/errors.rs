//! Failures reach JS as typed errors, built on the JS thread with their `code`
//! and detail set here: a core error becomes a `LockError` (the class
//! `lib/errors.js` hands over once per JS thread with `setErrorClass`), or a
//! `RangeError` / `TypeError` for an argument's value. Without a registered
//! class a plain `Error` carries the same properties. Promises are rejected
//! with them by `settle/`; a synchronous method throws them through
//! `From<Failure> for napi::Error`. Where an error is a value instead (the
//! client's `'lost'` and `'error'` events, a lock's `loss`), `ErrorObject`
//! builds the same error.

use std::cell::RefCell;
use std::ptr;

use napi::bindgen_prelude::{ToNapiValue, Unknown};
use napi::{sys, Env, JsError, JsValue, Status};
use napi_derive::napi;

use crate::binding::events::LockErrorInfo;
use crate::core::{ErrorCode, LockError};

/// A failure on its way to JS: a core error, or one napi itself produced.
pub enum Failure {
    Lock(LockError),
    Napi(napi::Error),
}

/// What an operation settles its promise with.
pub type JsResult<T> = std::result::Result<T, Failure>;

/// Turns a core error into what a promise is rejected with, or (through `?`
/// in a synchronous method) what it throws.
pub fn to_napi(err: LockError) -> Failure {
    Failure::Lock(err)
}

impl From<napi::Error> for Failure {
    fn from(err: napi::Error) -> Failure {
        Failure::Napi(err)
    }
}

impl From<Failure> for napi::Error {
    /// For a synchronous method, which runs on its env's JS thread: the error
    /// is built now, and napi throws that very object. Elsewhere (a future
    /// given to napi's `spawn_future`) only the message would be left: async
    /// operations settle through `settle/`, which builds the error itself.
    fn from(failure: Failure) -> napi::Error {
        let err = match failure {
            Failure::Napi(e) => return e,
            Failure::Lock(e) => e,
        };
        let Some(env) = current_env() else {
            return napi::Error::new(Status::GenericFailure, err.message);
        };
        match build(env, &err) {
            Some(value) => napi::Error::from_unknown_without_coercion(unsafe {
                Unknown::from_raw_unchecked(env, value)
            }),
            None => napi::Error::new(Status::GenericFailure, err.message),
        }
    }
}

impl Failure {
    /// The JS error (on `env`'s JS thread); null only when the environment
    /// can no longer build one (it is being torn down).
    pub fn into_js(self, env: sys::napi_env) -> sys::napi_value {
        let napi = match self {
            Failure::Lock(e) => match build(env, &e) {
                Some(error) => return error,
                None => napi::Error::new(Status::GenericFailure, e.message),
            },
            Failure::Napi(e) => e,
        };
        unsafe { JsError::from(napi).into_value(env) }
    }
}

/// A core error handed to JS as a value rather than a rejection (an event's
/// payload, a getter's result), built on the JS thread like a rejection's.
pub struct ErrorObject(pub LockError);

impl ToNapiValue for ErrorObject {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let value = Failure::Lock(val.0).into_js(env);
        if value.is_null() {
            return Err(napi::Error::new(
                Status::GenericFailure,
                "the environment is shutting down",
            ));
        }
        Ok(value)
    }
}

/// The JS class an error code is built as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// `LockError` (or a plain `Error` when none is registered).
    Lock,
    /// A bad argument's value, as Node's own: `RangeError` with `ERR_OUT_OF_RANGE`.
    Range,
    /// `TypeError` with `ERR_INVALID_ARG_VALUE`.
    Type,
}

fn class_of(code: ErrorCode) -> Class {
    match code {
        ErrorCode::OutOfRange => Class::Range,
        ErrorCode::InvalidArgValue => Class::Type,
        _ => Class::Lock,
    }
}

/// `err.name` of a lock error built without the registered class (the class
/// sets the same itself).
fn lock_error_name(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::Aborted => "AbortError",
        _ => "LockError",
    }
}

/// The class `lib/errors.js` registered on this JS thread, and the thread's env.
struct Registered {
    env: sys::napi_env,
    class: Option<sys::napi_ref>,
}

thread_local! {
    // One env per JS thread (Node's main thread, each worker's own thread).
    static REGISTERED: RefCell<Option<Registered>> = const { RefCell::new(None) };
}

/// Remembers the env the addon was loaded into on this thread (a class
/// registered for that env before stays).
#[cfg_attr(test, allow(dead_code))] // napi registers it; unit-test builds register nothing
#[napi(module_exports)]
pub fn loaded(env: Env) -> napi::Result<()> {
    let env = env.raw();
    REGISTERED.with(|r| {
        let mut r = r.borrow_mut();
        if r.as_ref().is_none_or(|r| r.env != env) {
            *r = Some(Registered { env, class: None });
        }
    });
    Ok(())
}

/// Registers the class native failures are built as, on this JS thread:
/// `new errorClass(code, message, detail)`, where `detail` carries `key`,
/// `attempts`, `remainingMs` and `nodes`.
#[cfg_attr(test, allow(dead_code))] // called from JS only
#[napi]
pub fn set_error_class(
    env: Env,
    #[napi(ts_arg_type = "new (code: string, message: string, detail: LockErrorInfo) => Error")]
    error_class: Unknown<'_>,
) -> napi::Result<()> {
    let raw_env = env.raw();
    let mut kind = 0;
    let is_function = unsafe { sys::napi_typeof(raw_env, error_class.raw(), &mut kind) }
        == sys::Status::napi_ok
        && kind == sys::ValueType::napi_function;
    if !is_function {
        return Err(napi::Error::new(
            Status::InvalidArg,
            "The error class must be a constructor",
        ));
    }
    let mut class = ptr::null_mut();
    let status = unsafe { sys::napi_create_reference(raw_env, error_class.raw(), 1, &mut class) };
    if status != sys::Status::napi_ok {
        return Err(napi::Error::new(
            Status::from(status),
            "napi_create_reference failed",
        ));
    }
    let previous = REGISTERED.with(|r| {
        r.borrow_mut()
            .replace(Registered {
                env: raw_env,
                class: Some(class),
            })
            .filter(|p| p.env == raw_env)
            .and_then(|p| p.class)
    });
    if let Some(previous) = previous {
        unsafe { sys::napi_delete_reference(raw_env, previous) };
    }
    Ok(())
}

fn current_env() -> Option<sys::napi_env> {
    REGISTERED
        .try_with(|r| r.borrow().as_ref().map(|r| r.env))
        .ok()
        .flatten()
}

/// The class registered for `env`, if any.
fn registered_class(env: sys::napi_env) -> Option<sys::napi_value> {
    let class = REGISTERED
        .try_with(|r| {
            r.borrow()
                .as_ref()
                .filter(|r| r.env == env)
                .and_then(|r| r.class)
        })
        .ok()
        .flatten()?;
    let mut value = ptr::null_mut();
    let ok =
        unsafe { sys::napi_get_reference_value(env, class, &mut value) } == sys::Status::napi_ok;
    (ok && !value.is_null()).then_some(value)
}

fn string(env: sys::napi_env, s: &str) -> Option<sys::napi_value> {
    let mut value = ptr::null_mut();
    let status = unsafe {
        sys::napi_create_string_utf8(env, s.as_ptr().cast(), s.len() as isize, &mut value)
    };
    (status == sys::Status::napi_ok).then_some(value)
}

/// Drops the exception a failed call left pending (the error is built another way).
fn clear_exception(env: sys::napi_env) {
    let mut pending = false;
    if unsafe { sys::napi_is_exception_pending(env, &mut pending) } == sys::Status::napi_ok
        && pending
    {
        let mut dropped = ptr::null_mut();
        unsafe { sys::napi_get_and_clear_last_exception(env, &mut dropped) };
    }
}

/// Builds the JS error for a core error (on `env`'s JS thread).
fn build(env: sys::napi_env, err: &LockError) -> Option<sys::napi_value> {
    let code = string(env, err.code.as_str())?;
    let message = string(env, &err.message)?;
    let mut error = ptr::null_mut();
    let status = match class_of(err.code) {
        Class::Range => unsafe { sys::napi_create_range_error(env, code, message, &mut error) },
        Class::Type => unsafe { sys::napi_create_type_error(env, code, message, &mut error) },
        Class::Lock => return lock_error(env, err, code, message),
    };
    (status == sys::Status::napi_ok).then_some(error)
}

/// `new LockError(code, message, detail)`, or a plain `Error` with the same
/// properties when no class is registered (or its constructor threw).
fn lock_error(
    env: sys::napi_env,
    err: &LockError,
    code: sys::napi_value,
    message: sys::napi_value,
) -> Option<sys::napi_value> {
    let detail = unsafe { LockErrorInfo::to_napi_value(env, LockErrorInfo::from(err)) }.ok()?;
    if let Some(class) = registered_class(env) {
        let args = [code, message, detail];
        let mut error = ptr::null_mut();
        let status =
            unsafe { sys::napi_new_instance(env, class, args.len(), args.as_ptr(), &mut error) };
        if status == sys::Status::napi_ok && !error.is_null() {
            return Some(error);
        }
        clear_exception(env);
    }
    let mut error = ptr::null_mut();
    if unsafe { sys::napi_create_error(env, code, message, &mut error) } != sys::Status::napi_ok {
        return None;
    }
    let name = string(env, lock_error_name(err.code))?;
    unsafe { sys::napi_set_named_property(env, error, c"name".as_ptr(), name) };
    for property in [c"key", c"attempts", c"remainingMs", c"nodes"] {
        let mut value = ptr::null_mut();
        let mut kind = 0;
        let present = unsafe {
            sys::napi_get_named_property(env, detail, property.as_ptr(), &mut value)
                == sys::Status::napi_ok
                && sys::napi_typeof(env, value, &mut kind) == sys::Status::napi_ok
        } && kind != sys::ValueType::napi_undefined
            && kind != sys::ValueType::napi_null;
        if present {
            unsafe { sys::napi_set_named_property(env, error, property.as_ptr(), value) };
        }
    }
    Some(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{NodeAnswer, NodeReport};

    #[test]
    fn argument_codes_are_node_argument_errors() {
        assert_eq!(class_of(ErrorCode::OutOfRange), Class::Range);
        assert_eq!(class_of(ErrorCode::InvalidArgValue), Class::Type);
    }

    #[test]
    fn lock_codes_are_lock_errors() {
        for code in [
            ErrorCode::Taken,
            ErrorCode::Timeout,
            ErrorCode::Lost,
            ErrorCode::Aborted,
            ErrorCode::Connection,
            ErrorCode::Redis,
            ErrorCode::Quorum,
            ErrorCode::Closed,
        ] {
            assert_eq!(class_of(code), Class::Lock, "{}", code.as_str());
        }
    }

    #[test]
    fn an_abort_is_named_abort_error() {
        assert_eq!(lock_error_name(ErrorCode::Aborted), "AbortError");
        assert_eq!(lock_error_name(ErrorCode::Timeout), "LockError");
        assert_eq!(lock_error_name(ErrorCode::Closed), "LockError");
    }

    #[test]
    fn detail_carries_code_and_nodes() {
        let err = LockError::new(ErrorCode::Quorum, "no quorum")
            .with_key("k")
            .with_attempts(2)
            .with_nodes(vec![NodeReport {
                node: "127.0.0.1:7001".into(),
                answer: NodeAnswer::Timeout,
            }]);
        let info = LockErrorInfo::from(&err);
        assert_eq!(info.code, "ERR_LOCK_QUORUM");
        assert_eq!(info.message, "no quorum");
        assert_eq!(info.attempts, 2);
        assert_eq!(info.key.as_deref(), Some("k"));
        assert_eq!(info.remaining_ms, None);
        assert_eq!(info.nodes.len(), 1);
        assert_eq!(info.nodes[0].node, "127.0.0.1:7001");
        assert_eq!(info.nodes[0].answer, "timeout");
        assert_eq!(info.nodes[0].detail, "timed out");
    }

    #[test]
    fn a_core_error_stays_typed_until_the_js_thread() {
        let failure = to_napi(LockError::new(ErrorCode::Closed, "closed"));
        assert!(matches!(failure, Failure::Lock(ref e) if e.code == ErrorCode::Closed));
        let napi = Failure::from(napi::Error::new(Status::InvalidArg, "bad"));
        assert!(matches!(napi, Failure::Napi(ref e) if e.reason == "bad"));
    }

    #[test]
    fn off_a_js_thread_a_failure_keeps_its_message() {
        // No env on a test thread: the conversion falls back to the message alone.
        let err = napi::Error::from(to_napi(LockError::new(ErrorCode::Closed, "client closed")));
        assert_eq!(err.reason, "client closed");
    }
}
