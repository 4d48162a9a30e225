//! Numbers as JavaScript passes them (doubles), checked to be whole and in
//! range before they become counts or durations (`ERR_OUT_OF_RANGE`).

use std::time::Duration;

use super::{MAX_LEASE_MS, MAX_MS};
use crate::core::error::{LockError, Result};

/// Checks a JS number meant as a whole count of ms (or a count) in `[min, MAX_MS]`.
pub fn whole_number(name: &str, value: f64, min: u64) -> Result<u64> {
    whole_number_up_to(name, value, min, MAX_MS)
}

fn whole_number_up_to(name: &str, value: f64, min: u64, max: u64) -> Result<u64> {
    if !value.is_finite() || value.fract() != 0.0 || value < min as f64 || value > max as f64 {
        let expected = format!("an integer >= {min} and <= {max}");
        return Err(LockError::out_of_range(name, &expected, value));
    }
    Ok(value as u64)
}

/// [`whole_number`] as a [`Duration`] in ms.
pub fn millis(name: &str, value: f64, min: u64) -> Result<Duration> {
    whole_number(name, value, min).map(Duration::from_millis)
}

/// A lease length (ttl, maxHold, renewInterval, minValidity) in ms, in
/// `[min, MAX_LEASE_MS]`.
pub fn lease_millis(name: &str, value: f64, min: u64) -> Result<Duration> {
    whole_number_up_to(name, value, min, MAX_LEASE_MS).map(Duration::from_millis)
}
