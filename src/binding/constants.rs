//! Limits and defaults the JavaScript side needs, exported from their one
//! declaration in the core so that JS never writes them again.

use std::time::Duration;

use napi_derive::napi;

use crate::core::model;
use crate::core::{config, quorum};

/// Longest wait, delay or timeout accepted, in ms (what a 32-bit signed timer can hold).
#[napi]
pub const MAX_MS: u32 = config::MAX_MS as u32;

/// Longest lock key (and key prefix), in bytes of UTF-8.
#[napi]
pub const MAX_KEY_BYTES: u32 = model::MAX_KEY_BYTES as u32;

/// The Redis URL a client uses when given no `url`, `nodes` or `cluster` and `REDIS_URL` is unset or empty.
#[napi]
pub const DEFAULT_URL: &str = config::DEFAULT_URL;

/// The environment variable that replaces `DEFAULT_URL` when set and not empty.
#[napi]
pub const URL_ENV: &str = config::URL_ENV;

/// The default lease length, in ms.
#[napi]
pub const DEFAULT_TTL_MS: u32 = config::DEFAULT_TTL.as_millis() as u32;

/// Nodes that must agree among `nodes` for an operation to succeed: floor(N/2) + 1.
#[napi]
pub fn quorum_size(nodes: u32) -> u32 {
    u32::try_from(quorum::needed(nodes as usize)).unwrap_or(u32::MAX)
}

/// The clock-drift allowance for a lease of `ttl` ms, in whole ms (rounded to the
/// nearest): ttl × `driftFactor` + 2 ms. 0 when `ttl` is negative or not a
/// finite duration, or `driftFactor` is not >= 0 and < 1.
#[napi]
pub fn drift_ms(ttl: f64, drift_factor: f64) -> f64 {
    if !(0.0..1.0).contains(&drift_factor) {
        return 0.0;
    }
    match Duration::try_from_secs_f64(ttl / 1000.0) {
        Ok(ttl) => (quorum::drift(ttl, drift_factor).as_nanos() as f64 / 1e6).round(),
        Err(_) => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_size_is_a_majority() {
        let sizes: Vec<u32> = (1..=7).map(quorum_size).collect();
        assert_eq!(sizes, [1, 2, 2, 3, 3, 4, 4]);
        assert_eq!(quorum_size(0), 1);
    }

    #[test]
    fn drift_is_rounded_ttl_times_factor_plus_two() {
        // The formula the redlock package computes in JS: Math.round(factor × ttl) + 2.
        for factor in [0.0, 0.001, 0.01, 0.05, 0.1, 0.25, 0.49] {
            for ttl in (0..=20_000u32).chain([30_000, 60_000, 86_400_000]) {
                let ttl = f64::from(ttl);
                assert_eq!(
                    drift_ms(ttl, factor),
                    (factor * ttl).round() + 2.0,
                    "ttl {ttl}, factor {factor}"
                );
            }
        }
    }

    #[test]
    fn drift_of_an_impossible_lease_is_zero() {
        assert_eq!(drift_ms(-1.0, 0.01), 0.0);
        assert_eq!(drift_ms(f64::NAN, 0.01), 0.0);
        assert_eq!(drift_ms(f64::INFINITY, 0.01), 0.0);
        assert_eq!(drift_ms(1000.0, -0.5), 0.0);
        assert_eq!(drift_ms(1000.0, f64::NAN), 0.0);
        assert_eq!(drift_ms(1000.0, 1.0), 0.0);
    }

    #[test]
    fn exported_values_are_the_core_values() {
        assert_eq!(u64::from(MAX_MS), config::MAX_MS);
        assert_eq!(MAX_KEY_BYTES as usize, model::MAX_KEY_BYTES);
        assert_eq!(u128::from(DEFAULT_TTL_MS), config::DEFAULT_TTL.as_millis());
        assert_eq!(DEFAULT_URL, config::DEFAULT_URL);
        assert_eq!(URL_ENV, config::URL_ENV);
    }
}
