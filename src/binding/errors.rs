//! A core error becomes a JS error whose message is the error as JSON; the JS
//! layer turns it into a `LockError` with a stable `code` (napi async functions
//! cannot set `code` themselves).

use crate::core::LockError;

/// Marks a message as lockdog's JSON error payload.
pub const MARKER: &str = "lockdog:";

pub fn to_napi(err: LockError) -> napi::Error {
    napi::Error::new(
        napi::Status::GenericFailure,
        format!("{MARKER}{}", err.to_json()),
    )
}
