//! One acquisition's options, as given (`None`: the client's default), and
//! resolved with every default filled in and checked.

use std::time::Duration;

use super::{
    DEFAULT_RETRY_DELAY, DEFAULT_RETRY_JITTER, DEFAULT_TTL, DEFAULT_WAIT_REPLICAS_TIMEOUT,
    DEFAULT_WAIT_TIMEOUT,
};
use crate::core::error::{LockError, Result};

/// Per-acquisition settings. `None` everywhere means "the client's default".
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct AcquireOptions {
    pub ttl: Option<Duration>,
    /// Retries after the first attempt; `None` = no limit but `wait_timeout`.
    pub retry_count: Option<Option<u32>>,
    pub retry_delay: Option<Duration>,
    pub retry_jitter: Option<Duration>,
    pub wait_timeout: Option<Duration>,
    /// Longest total time the watchdog keeps the lock alive; `None` = no cap.
    pub max_hold: Option<Option<Duration>>,
    /// Renew every this often; `None` = ttl / 3.
    pub renew_interval: Option<Duration>,
    /// Whether the native watchdog renews the lock (default true).
    pub auto_renew: Option<bool>,
    /// Smallest validity an acquisition may come back with.
    pub min_validity: Option<Duration>,
    /// Replicas that should acknowledge an acquisition or extension (Redis
    /// `WAIT`, single node only); 0 = do not wait.
    pub wait_replicas: Option<u32>,
    /// Longest wait for those acknowledgements.
    pub wait_replicas_timeout: Option<Duration>,
}

/// [`AcquireOptions`] with every default filled in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AcquireSpec {
    pub ttl: Duration,
    pub retry_count: Option<u32>,
    pub retry_delay: Duration,
    pub retry_jitter: Duration,
    pub wait_timeout: Duration,
    pub max_hold: Option<Duration>,
    pub renew_interval: Duration,
    pub auto_renew: bool,
    pub min_validity: Duration,
    /// `Some((replicas, timeout))` when acquisitions and extensions wait for replicas.
    pub wait_replicas: Option<(u32, Duration)>,
    /// What the client's settings make of `ttl` (set by
    /// `ClientConfig::spec`; zero before): the clock drift a validity
    /// allows for...
    pub drift: Duration,
    /// ...and how long one node may take to answer an attempt.
    pub node_timeout: Duration,
}

impl AcquireOptions {
    /// Fills unset fields from `base`.
    pub fn or(&self, base: &AcquireOptions) -> AcquireOptions {
        AcquireOptions {
            ttl: self.ttl.or(base.ttl),
            retry_count: self.retry_count.or(base.retry_count),
            retry_delay: self.retry_delay.or(base.retry_delay),
            retry_jitter: self.retry_jitter.or(base.retry_jitter),
            wait_timeout: self.wait_timeout.or(base.wait_timeout),
            max_hold: self.max_hold.or(base.max_hold),
            renew_interval: self.renew_interval.or(base.renew_interval),
            auto_renew: self.auto_renew.or(base.auto_renew),
            min_validity: self.min_validity.or(base.min_validity),
            wait_replicas: self.wait_replicas.or(base.wait_replicas),
            wait_replicas_timeout: self.wait_replicas_timeout.or(base.wait_replicas_timeout),
        }
    }

    pub fn validate(&self) -> Result<()> {
        self.resolve().map(|_| ())
    }

    pub fn resolve(&self) -> Result<AcquireSpec> {
        let ttl = self.ttl.unwrap_or(DEFAULT_TTL);
        let renew_interval = self.renew_interval.unwrap_or(ttl / 3);
        if renew_interval >= ttl {
            return Err(LockError::out_of_range(
                "renewInterval",
                "shorter than ttl",
                renew_interval.as_millis(),
            ));
        }
        if let Some(Some(hold)) = self.max_hold {
            if hold.is_zero() {
                return Err(LockError::out_of_range("maxHold", ">= 1", 0));
            }
        }
        Ok(AcquireSpec {
            ttl,
            retry_count: self.retry_count.unwrap_or(None),
            retry_delay: self.retry_delay.unwrap_or(DEFAULT_RETRY_DELAY),
            retry_jitter: self.retry_jitter.unwrap_or(DEFAULT_RETRY_JITTER),
            wait_timeout: self.wait_timeout.unwrap_or(DEFAULT_WAIT_TIMEOUT),
            max_hold: self.max_hold.unwrap_or(None),
            renew_interval: renew_interval.max(Duration::from_millis(1)),
            auto_renew: self.auto_renew.unwrap_or(true),
            min_validity: self.min_validity.unwrap_or(Duration::from_millis(1)),
            wait_replicas: match self.wait_replicas.unwrap_or(0) {
                0 => None,
                n => Some((
                    n,
                    self.wait_replicas_timeout
                        .unwrap_or(DEFAULT_WAIT_REPLICAS_TIMEOUT),
                )),
            },
            drift: Duration::ZERO,
            node_timeout: Duration::ZERO,
        })
    }
}
