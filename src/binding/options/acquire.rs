//! One acquisition's options, checked into the core's (`Infinity` and -1
//! mean "no limit" where JS callers use them), and what it takes
//! ([`AcquireKind`], below).

use std::time::Duration;

use napi_derive::napi;

use crate::core::config::{self, lease_millis, millis, whole_number};
use crate::core::model::lock_keys;
use crate::core::{self as core, LockError, Request};

/// Settings of one acquisition; unset fields take the client's defaults.
#[napi(object, object_to_js = false)]
#[derive(Debug, Default)]
pub struct AcquireOptions {
    /// Lease length in ms (1 ..= `Number.MAX_SAFE_INTEGER`). The default value is the client's `ttl` (30000).
    pub ttl: Option<f64>,
    /// Retries after the first attempt while the lock is held by another owner or
    /// its nodes are unreachable (`Infinity` or -1: no limit but `waitTimeout`).
    /// With a count, the wait ends after about retryCount × (retryDelay +
    /// retryJitter). The default value is `Infinity`.
    pub retry_count: Option<f64>,
    /// Pause between attempts, in ms, plus 0..retryJitter: the holder's release
    /// notice (Redis pub/sub) ends it early for the first waiter of a key, and it
    /// never outlasts the holder's remaining TTL. Without a `retryCount`, a waiter
    /// that hears the key's release notices waits for one (or the lease's end)
    /// instead. The default value is 100.
    pub retry_delay: Option<f64>,
    /// Random extra pause of 0..retryJitter ms per attempt. The default value is 100.
    pub retry_jitter: Option<f64>,
    /// Longest total wait in ms (`Infinity`: about 24.8 days, the longest timer);
    /// then the acquire rejects with `ERR_LOCK_TIMEOUT` (held by another), or with
    /// the outage's own error (`ERR_LOCK_CONNECTION`, `ERR_LOCK_QUORUM`,
    /// `ERR_LOCK_REDIS`). The default value is 10000.
    pub wait_timeout: Option<f64>,
    /// Longest time the watchdog keeps this lock alive, in ms; then it lapses and
    /// `lock.signal` aborts with `ERR_LOCK_LOST`. The default value is no limit.
    pub max_hold: Option<f64>,
    /// Renewal period in ms. The default value is `ttl / 3`.
    pub renew_interval: Option<f64>,
    /// Whether the native watchdog renews this lock. The default value is `true`.
    pub auto_renew: Option<bool>,
    /// Smallest validity (ms) an acquisition may come back with; an attempt that
    /// leaves less counts as failed. The default value is 1.
    pub min_validity: Option<f64>,
    /// Replicas that should acknowledge this acquisition and its manual extensions
    /// (Redis `WAIT`, on a connection of its own; one master with replicas only).
    /// Best effort: the lock is granted either way and `lock.replicas` tells how
    /// many acknowledged. The default value is 0 (no wait).
    pub wait_replicas: Option<f64>,
    /// Longest wait for those acknowledgements, in ms (shorter than ttl). The default value is 100.
    pub wait_replicas_timeout: Option<f64>,
}

pub(super) fn opt_millis(
    name: &str,
    v: Option<f64>,
    min: u64,
) -> Result<Option<Duration>, LockError> {
    v.map(|v| millis(name, v, min)).transpose()
}

fn opt_lease(name: &str, v: Option<f64>, min: u64) -> Result<Option<Duration>, LockError> {
    v.map(|v| lease_millis(name, v, min)).transpose()
}

/// `Infinity` as the longest wait a timer can express.
fn infinite_as_max(v: f64) -> f64 {
    if v == f64::INFINITY {
        config::MAX_MS as f64
    } else {
        v
    }
}

/// `Infinity` and -1 mean "no limit".
fn retry_count(v: Option<f64>) -> Result<Option<Option<u32>>, LockError> {
    match v {
        None => Ok(None),
        Some(v) if v == f64::INFINITY || v == -1.0 => Ok(Some(None)),
        Some(v) => {
            let n = whole_number("retryCount", v, 0)?;
            Ok(Some(Some(u32::try_from(n).unwrap_or(u32::MAX))))
        }
    }
}

fn max_hold(v: Option<f64>) -> Result<Option<Option<Duration>>, LockError> {
    match v {
        None => Ok(None),
        Some(v) if v == f64::INFINITY => Ok(Some(None)),
        Some(v) => lease_millis("maxHold", v, 1).map(|d| Some(Some(d))),
    }
}

impl AcquireOptions {
    pub fn to_core(&self) -> Result<core::AcquireOptions, LockError> {
        let o = core::AcquireOptions {
            ttl: opt_lease("ttl", self.ttl, 1)?,
            retry_count: retry_count(self.retry_count)?,
            retry_delay: opt_millis("retryDelay", self.retry_delay, 0)?,
            retry_jitter: opt_millis("retryJitter", self.retry_jitter, 0)?,
            wait_timeout: opt_millis("waitTimeout", self.wait_timeout.map(infinite_as_max), 0)?,
            max_hold: max_hold(self.max_hold)?,
            renew_interval: opt_lease("renewInterval", self.renew_interval, 1)?,
            auto_renew: self.auto_renew,
            min_validity: opt_lease("minValidity", self.min_validity, 1)?,
            wait_replicas: self
                .wait_replicas
                .map(|v| {
                    whole_number("waitReplicas", v, 0).and_then(|n| {
                        u32::try_from(n).map_err(|_| {
                            LockError::out_of_range("waitReplicas", "at most 4294967295", v)
                        })
                    })
                })
                .transpose()?,
            wait_replicas_timeout: opt_millis(
                "waitReplicasTimeout",
                self.wait_replicas_timeout,
                1,
            )?,
        };
        o.validate()?;
        Ok(o)
    }
}

// What one acquisition takes, resolved once into the core's [`Request`]: a
// plain lock, a semaphore's permits or a read-write lock's side, each of
// them optionally fair.

/// What an acquisition takes. Without any field: a plain lock on every key.
#[napi(object, object_to_js = false)]
#[derive(Default)]
pub struct AcquireKind {
    /// Makes it a semaphore of this many permits held at once (one key). The default value is no semaphore.
    pub limit: Option<f64>,
    /// Permits of the semaphore to take (with `limit`). The default value is 1.
    pub permits: Option<f64>,
    /// Makes it a read-write lock (one key): `true` its writer, `false` a reader. The default value is no read-write lock.
    pub write: Option<bool>,
    /// Serves waiters across every process in arrival order through a line
    /// kept in Redis (one key; one node or a cluster). The default value is `false`.
    pub fair: Option<bool>,
}

/// [`AcquireKind`] checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    take: Take,
    fair: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Take {
    Lock,
    Permits { limit: u32, permits: u32 },
    ReadWrite { write: bool },
}

fn count(name: &str, value: f64) -> Result<u32, LockError> {
    let n = whole_number(name, value, 0)?;
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}

impl AcquireKind {
    /// Checks the fields (counts as `ERR_OUT_OF_RANGE`, combinations as
    /// `ERR_INVALID_ARG_VALUE`) before the options and keys are.
    pub fn to_kind(&self) -> Result<Kind, LockError> {
        let take = match (self.limit, self.permits, self.write) {
            (None, None, None) => Take::Lock,
            (None, None, Some(write)) => Take::ReadWrite { write },
            (_, _, Some(_)) => {
                return Err(LockError::invalid_value(
                    "write",
                    "cannot be combined with limit or permits",
                ))
            }
            (None, Some(_), None) => {
                return Err(LockError::invalid_value(
                    "limit",
                    "is required with permits",
                ))
            }
            (Some(limit), permits, None) => Take::Permits {
                limit: count("limit", limit)?,
                permits: permits.map_or(Ok(1), |p| count("permits", p))?,
            },
        };
        Ok(Kind {
            take,
            fair: self.fair.unwrap_or(false),
        })
    }
}

/// The one key of a semaphore, read-write or fair lock.
fn single(keys: Vec<String>) -> Result<String, LockError> {
    match <[String; 1]>::try_from(keys) {
        Ok([key]) => Ok(key),
        // An empty list fails as it does for a plain lock.
        Err(keys) if keys.is_empty() => lock_keys(keys).map(|_| String::new()),
        Err(_) => Err(LockError::invalid_value(
            "key",
            "must be a single key for a semaphore, a read-write lock or a fair lock",
        )),
    }
}

impl Kind {
    /// Checks `keys` and `opts` for this kind without I/O (a plain lock takes
    /// its place among this client's callers of the key).
    pub fn prepare(
        self,
        client: &core::Client,
        keys: Vec<String>,
        opts: &core::AcquireOptions,
    ) -> Result<Request, LockError> {
        match (self.take, self.fair) {
            (Take::Lock, false) => client.prepare_lock(keys, opts),
            (Take::Lock, true) => client.prepare_fair(single(keys)?, opts),
            (Take::Permits { limit, permits }, false) => {
                client.prepare_permits(single(keys)?, limit, permits, opts)
            }
            (Take::Permits { limit, permits }, true) => {
                client.prepare_fair_permits(single(keys)?, limit, permits, opts)
            }
            (Take::ReadWrite { write }, false) => client.prepare_rw(single(keys)?, write, opts),
            (Take::ReadWrite { write }, true) => client.prepare_fair_rw(single(keys)?, write, opts),
        }
    }
}

// The same options packed in a `Float64Array` (the form `lib/` sends).

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

/// The length of the packed form: the bit set, then one number per name.
pub const PACKED_LEN: usize = PACKED.len() + 1;

impl AcquireOptions {
    /// The options packed as `packed_acquire_options` describes.
    pub fn from_packed(p: &[f64]) -> Result<AcquireOptions, LockError> {
        if p.len() != PACKED_LEN || !(0.0..(1u64 << PACKED.len()) as f64).contains(&p[0]) {
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
    use super::*;
    use crate::core::config::{ClientConfig, NodeSpec};
    use crate::core::model::Kind as Permits;
    use crate::core::ErrorCode;

    fn client(nodes: usize) -> core::Client {
        let cfg = ClientConfig {
            nodes: (0..nodes)
                .map(|i| NodeSpec::Master(format!("redis://127.0.0.1:{}", 7000 + i)))
                .collect(),
            ..ClientConfig::default()
        };
        match core::Client::new(cfg, None) {
            Ok(c) => c,
            Err(e) => panic!("client: {e}"),
        }
    }

    fn kind(
        limit: Option<f64>,
        permits: Option<f64>,
        write: Option<bool>,
        fair: bool,
    ) -> AcquireKind {
        AcquireKind {
            limit,
            permits,
            write,
            fair: Some(fair),
        }
    }

    fn prepared(k: AcquireKind, keys: &[&str], nodes: usize) -> Result<Request, LockError> {
        let keys = keys.iter().map(|k| k.to_string()).collect();
        k.to_kind()?
            .prepare(&client(nodes), keys, &core::AcquireOptions::default())
    }

    fn error(r: Result<Request, LockError>) -> LockError {
        match r {
            Ok(_) => panic!("expected an error"),
            Err(e) => e,
        }
    }

    fn taken(r: Result<Request, LockError>) -> Option<(u32, u32, Permits)> {
        match r {
            Ok(request) => request.permits.map(|p| (p.limit, p.permits, p.kind)),
            Err(e) => panic!("prepare: {e}"),
        }
    }

    #[test]
    fn no_kind_is_a_plain_lock_on_every_key() {
        let request = match prepared(AcquireKind::default(), &["a", "b"], 1) {
            Ok(r) => r,
            Err(e) => panic!("prepare: {e}"),
        };
        assert!(request.permits.is_none());
        assert_eq!(*request.names, ["a", "b"]);
    }

    #[test]
    fn a_plain_lock_on_one_key_takes_its_place_in_line() {
        let request = prepared(AcquireKind::default(), &["a"], 1);
        assert!(request.is_ok_and(|r| r.arrival.is_some()));
        let fair = prepared(kind(None, None, None, true), &["a"], 1);
        assert!(fair.is_ok_and(|r| r.arrival.is_none()));
    }

    #[test]
    fn limit_makes_a_semaphore_of_one_permit_by_default() {
        let got = taken(prepared(kind(Some(3.0), None, None, false), &["s"], 1));
        assert_eq!(got, Some((3, 1, Permits::Semaphore)));
        let got = taken(prepared(kind(Some(3.0), Some(2.0), None, false), &["s"], 1));
        assert_eq!(got, Some((3, 2, Permits::Semaphore)));
    }

    #[test]
    fn a_semaphore_on_several_nodes_takes_slots() {
        let got = taken(prepared(kind(Some(3.0), Some(2.0), None, false), &["s"], 3));
        assert_eq!(got, Some((3, 2, Permits::Slots)));
    }

    #[test]
    fn write_picks_the_side_of_a_read_write_lock() {
        let read = taken(prepared(kind(None, None, Some(false), false), &["rw"], 1));
        assert_eq!(read.map(|t| t.2), Some(Permits::Read));
        let write = taken(prepared(kind(None, None, Some(true), false), &["rw"], 1));
        assert_eq!(write.map(|t| t.2), Some(Permits::Write));
    }

    #[test]
    fn fair_serves_each_kind_in_arrival_order() {
        let lock = taken(prepared(kind(None, None, None, true), &["f"], 1));
        assert_eq!(lock.map(|t| t.2), Some(Permits::Fair));
        let sem = taken(prepared(kind(Some(4.0), Some(2.0), None, true), &["f"], 1));
        assert_eq!(sem, Some((4, 2, Permits::FairPermits)));
        let rw = taken(prepared(kind(None, None, Some(true), true), &["f"], 1));
        assert_eq!(rw.map(|t| t.2), Some(Permits::FairPermits));
    }

    #[test]
    fn fair_is_refused_with_several_nodes() {
        for k in [
            kind(None, None, None, true),
            kind(Some(2.0), None, None, true),
            kind(None, None, Some(false), true),
        ] {
            let e = error(prepared(k, &["f"], 3));
            assert_eq!(e.code, ErrorCode::InvalidArgValue);
            assert!(e.message.contains("'fair'"), "{}", e.message);
        }
    }

    #[test]
    fn counts_are_checked_as_before() {
        let e = error(prepared(kind(Some(1.5), Some(1.0), None, false), &["s"], 1));
        assert_eq!(e.code, ErrorCode::OutOfRange);
        assert!(e.message.contains("\"limit\""), "{}", e.message);
        let e = error(prepared(
            kind(Some(2.0), Some(-1.0), None, false),
            &["s"],
            1,
        ));
        assert!(e.message.contains("\"permits\""), "{}", e.message);
        let e = error(prepared(kind(Some(2.0), Some(3.0), None, false), &["s"], 1));
        assert_eq!(e.code, ErrorCode::OutOfRange);
        assert!(e.message.contains("<= limit (2)"), "{}", e.message);
    }

    #[test]
    fn contradicting_fields_are_refused() {
        let e = error(prepared(
            kind(Some(2.0), None, Some(true), false),
            &["s"],
            1,
        ));
        assert_eq!(e.code, ErrorCode::InvalidArgValue);
        assert!(e.message.contains("'write'"), "{}", e.message);
        let e = error(prepared(kind(None, Some(1.0), None, false), &["s"], 1));
        assert!(e.message.contains("'limit' is required"), "{}", e.message);
    }

    #[test]
    fn a_kind_needs_exactly_one_key() {
        let e = error(prepared(kind(None, None, None, true), &["a", "b"], 1));
        assert_eq!(e.code, ErrorCode::InvalidArgValue);
        assert!(e.message.contains("single key"), "{}", e.message);
        let e = error(prepared(kind(Some(2.0), None, None, false), &[], 1));
        assert!(e.message.contains("empty list"), "{}", e.message);
    }
}

#[cfg(test)]
mod packed_tests {
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
