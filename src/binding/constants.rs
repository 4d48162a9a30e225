//! Limits and defaults the JavaScript side needs, exported from their one
//! declaration in the core so that JS never writes them again.

use napi_derive::napi;

use crate::core::{config, keys};

/// Longest wait, delay or timeout accepted, in ms (what a 32-bit signed timer can hold).
#[napi]
pub const MAX_MS: u32 = config::MAX_MS as u32;

/// Longest lock key (and key prefix), in bytes of UTF-8.
#[napi]
pub const MAX_KEY_BYTES: u32 = keys::MAX_KEY_BYTES as u32;

/// The Redis URL a client uses when given no `url`, `nodes` or `cluster` and `REDIS_URL` is unset or empty.
#[napi]
pub const DEFAULT_URL: &str = config::DEFAULT_URL;

/// The environment variable that replaces `DEFAULT_URL` when set and not empty.
#[napi]
pub const URL_ENV: &str = config::URL_ENV;

/// The default lease length, in ms.
#[napi]
pub const DEFAULT_TTL_MS: u32 = config::DEFAULT_TTL.as_millis() as u32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exported_values_are_the_core_values() {
        assert_eq!(u64::from(MAX_MS), config::MAX_MS);
        assert_eq!(MAX_KEY_BYTES as usize, keys::MAX_KEY_BYTES);
        assert_eq!(u128::from(DEFAULT_TTL_MS), config::DEFAULT_TTL.as_millis());
        assert_eq!(DEFAULT_URL, config::DEFAULT_URL);
        assert_eq!(URL_ENV, config::URL_ENV);
    }
}
