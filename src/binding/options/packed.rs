//! An acquisition's options packed by `lib/` in a `Float64Array`: the
//! native side reads them with one call, where an object costs a lookup of
//! each field's name.

use napi_derive::napi;

use super::acquire::AcquireOptions;
use crate::core::LockError;

/// The fields of [`AcquireOptions`] in the order of their packed form
/// (`lib/` sends that: reading a typed array costs one call, reading an
/// object's fields one lookup of each name).
const PACKED: [&str; 11] = [
    "ttl",
    "retryCount",
    "retryDelay",
    "retryJitter",
    "waitTimeout",
    "maxHold",
    "renewInterval",
    "autoRenew",
    "minValidity",
    "waitReplicas",
    "waitReplicasTimeout",
];

/// The names of an acquisition's options in the order `NativeClient.acquire`
/// takes them packed in a `Float64Array`: first a bit set of the fields
/// given (bit i for name i), then one number per name (`autoRenew` as 0 or 1).
#[napi]
pub fn packed_acquire_options() -> Vec<&'static str> {
    PACKED.to_vec()
}

impl AcquireOptions {
    /// The options packed as [`packed_acquire_options`] describes.
    pub fn from_packed(p: &[f64]) -> Result<AcquireOptions, LockError> {
        if p.len() != PACKED.len() + 1 || !(0.0..(1u64 << PACKED.len()) as f64).contains(&p[0]) {
            return Err(LockError::invalid_value(
                "options",
                &format!(
                    "packed must hold a bit set and {} numbers, in the order packedAcquireOptions() names",
                    PACKED.len()
                ),
            ));
        }
        let given = p[0] as u64;
        let get = |i: usize| (given & (1 << i) != 0).then(|| p[i + 1]);
        Ok(AcquireOptions {
            ttl: get(0),
            retry_count: get(1),
            retry_delay: get(2),
            retry_jitter: get(3),
            wait_timeout: get(4),
            max_hold: get(5),
            renew_interval: get(6),
            auto_renew: get(7).map(|v| v != 0.0),
            min_validity: get(8),
            wait_replicas: get(9),
            wait_replicas_timeout: get(10),
        })
    }

    /// An acquisition's options as JS passed them: none, an object, or packed
    /// in a `Float64Array`.
    pub fn read(env: &napi::Env, value: Option<napi::Unknown<'_>>) -> napi::Result<AcquireOptions> {
        use napi::bindgen_prelude::FromNapiValue;
        use napi::JsValue;
        let Some(value) = value else {
            return Ok(AcquireOptions::default());
        };
        let env = env.raw();
        let raw = value.raw();
        let mut typed = false;
        napi::check_status!(unsafe { napi::sys::napi_is_typedarray(env, raw, &mut typed) })?;
        if typed {
            let packed = unsafe { <&[f64]>::from_napi_value(env, raw)? };
            return Ok(
                AcquireOptions::from_packed(packed).map_err(crate::binding::errors::to_napi)?
            );
        }
        unsafe { AcquireOptions::from_napi_value(env, raw) }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn packed_options_give_exactly_the_fields_whose_bit_is_set() {
        let mut p = [0.0; 12];
        p[0] = (1 | 1 << 4 | 1 << 7) as f64;
        p[1] = 5_000.0;
        p[2] = 9.0; // not given: ignored
        p[5] = f64::INFINITY;
        p[8] = 0.0;
        let names = packed_acquire_options();
        assert_eq!(names.len(), 11);
        assert_eq!(
            (names[0], names[4], names[7]),
            ("ttl", "waitTimeout", "autoRenew")
        );
        let o = AcquireOptions::from_packed(&p).expect("valid");
        assert_eq!(o.ttl, Some(5_000.0));
        assert_eq!(o.retry_count, None);
        assert_eq!(o.wait_timeout, Some(f64::INFINITY));
        assert_eq!(o.auto_renew, Some(false));
        assert_eq!(o.max_hold, None);
        let core = o.to_core().expect("valid options");
        assert_eq!(core.ttl, Some(Duration::from_secs(5)));
        // Nothing given: the defaults.
        let none = AcquireOptions::from_packed(&[0.0; 12]).expect("valid");
        assert!(none.ttl.is_none() && none.auto_renew.is_none());
        // A value the checks refuse is refused as given.
        p[1] = -1.0;
        assert!(AcquireOptions::from_packed(&p)
            .expect("packed")
            .to_core()
            .is_err());
        for bad in [
            &[0.0; 11][..],
            &[0.0; 13][..],
            &[4096.0; 12][..],
            &[f64::NAN; 12][..],
            &[-1.0; 12][..],
        ] {
            let err = AcquireOptions::from_packed(bad).expect_err("refused");
            assert_eq!(err.code, crate::core::ErrorCode::InvalidArgValue);
        }
    }
}
