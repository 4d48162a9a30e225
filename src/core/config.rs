//! Validated settings with their defaults. Every default lives here, once.

use std::time::Duration;

use crate::core::error::{LockError, Result};
pub use crate::core::tls::TlsConfig;
use crate::core::{broken, quorum};

/// Largest wait, delay or timeout accepted, in ms (what a 32-bit signed timer can hold).
pub const MAX_MS: u64 = 2_147_483_647;
/// Largest lease accepted, in ms: every whole number a JS number holds exactly
/// (`Number.MAX_SAFE_INTEGER`). Redis takes 64-bit PX values, and no timer is
/// armed for a lease's full length, so the timer limit does not apply.
pub const MAX_LEASE_MS: u64 = (1 << 53) - 1;

/// The node a client without `url`, `nodes` or `cluster` uses when [`URL_ENV`] is unset or empty.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";
/// The environment variable whose (non-empty) value replaces [`DEFAULT_URL`].
pub const URL_ENV: &str = "REDIS_URL";
pub const DEFAULT_TTL: Duration = Duration::from_millis(30_000);
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(2_000);
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_millis(1_000);
pub const DEFAULT_DRIFT_FACTOR: f64 = 0.01;
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(100);
pub const DEFAULT_RETRY_JITTER: Duration = Duration::from_millis(100);
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_millis(10_000);
pub const DEFAULT_WAIT_REPLICAS_TIMEOUT: Duration = Duration::from_millis(100);
/// Share of the TTL a Redlock node gets to answer an acquire or renewal.
pub const NODE_TIMEOUT_SHARE: f64 = 0.05;

/// How a client reaches Redis and the defaults its locks use.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientConfig {
    /// The independent lock nodes (the quorum's members); one node is the
    /// single-node lock, several are Redlock.
    pub nodes: Vec<NodeSpec>,
    /// A master found through Redis Sentinel instead of `nodes` (which are then
    /// empty): one lock node that follows failovers.
    pub sentinel: Option<SentinelConfig>,
    pub key_prefix: String,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// Per-node answer budget for acquire and renew; `None` = derived from the TTL.
    pub node_timeout: Option<Duration>,
    pub drift_factor: f64,
    /// Hand out fencing tokens: one counter per lock key, kept in Redis for good.
    pub fencing: bool,
    /// Certificates for `rediss://` nodes.
    pub tls: Option<TlsConfig>,
    pub defaults: AcquireOptions,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            nodes: vec![NodeSpec::Master(DEFAULT_URL.to_string())],
            sentinel: None,
            key_prefix: String::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            node_timeout: None,
            drift_factor: DEFAULT_DRIFT_FACTOR,
            fencing: false,
            tls: None,
            defaults: AcquireOptions::default(),
        }
    }
}

/// One lock node: one vote in the quorum.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum NodeSpec {
    /// One Redis master, by URL.
    Master(String),
    /// A Redis Cluster, by its seed URLs: one vote whose commands route by key,
    /// so a lock's keys must share a hash slot.
    Cluster(Vec<String>),
}

impl From<String> for NodeSpec {
    fn from(url: String) -> Self {
        NodeSpec::Master(url)
    }
}

impl From<&str> for NodeSpec {
    fn from(url: &str) -> Self {
        NodeSpec::Master(url.to_string())
    }
}

impl NodeSpec {
    pub fn is_cluster(&self) -> bool {
        matches!(self, NodeSpec::Cluster(_))
    }
}

impl ClientConfig {
    /// How many independent lock nodes there are: a cluster counts as one.
    pub fn node_count(&self) -> usize {
        self.nodes.len() + usize::from(self.sentinel.is_some())
    }

    /// True when a member is a Redis Cluster (its locks must keep to one hash slot).
    pub fn has_cluster(&self) -> bool {
        self.nodes.iter().any(NodeSpec::is_cluster)
    }

    pub fn quorum(&self) -> usize {
        quorum::needed(self.node_count())
    }

    /// How long one node may take to answer an acquire or renewal of a lock with `ttl`.
    /// One node gets the whole command timeout; with several, a slow node must not
    /// eat the validity the others give, so it gets a small share of the TTL.
    pub fn node_timeout_for(&self, ttl: Duration) -> Duration {
        if let Some(t) = self.node_timeout {
            return t;
        }
        if self.node_count() == 1 {
            return self.command_timeout;
        }
        ttl.mul_f64(NODE_TIMEOUT_SHARE)
            .max(Duration::from_millis(1))
            .min(self.command_timeout)
    }

    /// The clock-drift allowance for a lease of `ttl`: ttl × driftFactor + 2 ms.
    pub fn drift_for(&self, ttl: Duration) -> Duration {
        broken::drift(quorum::drift(ttl, self.drift_factor))
    }

    pub fn validate(&self) -> Result<()> {
        if let Some(sentinel) = &self.sentinel {
            if !self.nodes.is_empty() {
                return Err(LockError::invalid_value(
                    "sentinel",
                    "cannot be combined with url, nodes or cluster (the sentinels name the master)",
                ));
            }
            if self.tls.is_some() {
                return Err(LockError::invalid_value(
                    "tls",
                    "is not supported with sentinel (sentinels and master are reached without TLS)",
                ));
            }
            sentinel.validate()?;
        } else if self.nodes.is_empty() {
            return Err(LockError::invalid_value(
                "nodes",
                "must list at least one Redis URL",
            ));
        }
        if let Some(i) = self
            .nodes
            .iter()
            .position(|n| matches!(n, NodeSpec::Cluster(seeds) if seeds.is_empty()))
        {
            return Err(LockError::invalid_value(
                if self.nodes.len() == 1 {
                    "cluster"
                } else {
                    "nodes"
                },
                &format!("member {i} is a cluster with no seed URL; give at least one"),
            ));
        }
        if !(0.0..0.5).contains(&self.drift_factor) || !self.drift_factor.is_finite() {
            return Err(LockError::out_of_range(
                "driftFactor",
                ">= 0 and < 0.5",
                self.drift_factor,
            ));
        }
        if let Some(tls) = &self.tls {
            tls.validate()?;
        }
        let spec = self.defaults.resolve()?;
        self.check_spec(&spec)
    }

    /// What an acquisition's settings must fit in this deployment.
    pub fn check_spec(&self, spec: &AcquireSpec) -> Result<()> {
        if let Some((_, wait)) = spec.wait_replicas {
            if self.has_cluster() || self.nodes.len() > 1 {
                return Err(LockError::invalid_value(
                    "waitReplicas",
                    "applies to one Redis master with replicas, not to several nodes (Redlock) or a cluster",
                ));
            }
            if wait >= spec.ttl {
                return Err(LockError::out_of_range(
                    "waitReplicasTimeout",
                    "shorter than ttl",
                    wait.as_millis(),
                ));
            }
        }
        Ok(())
    }
}

/// A master found through Redis Sentinel.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct SentinelConfig {
    /// `redis://[user:password@]host:port` of each sentinel, asked in turn.
    pub sentinels: Vec<String>,
    /// The name the sentinels monitor the master under.
    pub name: String,
    /// Credentials for sentinels whose URL carries none.
    pub sentinel_username: Option<String>,
    pub sentinel_password: Option<String>,
    /// Credentials for the master.
    pub username: Option<String>,
    pub password: Option<String>,
    /// The master's database number.
    pub db: i64,
}

impl SentinelConfig {
    pub fn validate(&self) -> Result<()> {
        if self.sentinels.is_empty() {
            return Err(LockError::invalid_value(
                "sentinel.sentinels",
                "must list at least one sentinel URL",
            ));
        }
        if let Some(url) = self.sentinels.iter().find(|u| !u.starts_with("redis://")) {
            let reason = if url.starts_with("rediss://") {
                "must list redis:// URLs (TLS to sentinels is not supported)"
            } else {
                "must list redis:// URLs"
            };
            return Err(LockError::invalid_value("sentinel.sentinels", reason));
        }
        if self.name.is_empty() {
            return Err(LockError::invalid_value(
                "sentinel.name",
                "must be the name the sentinels monitor the master under (a non-empty string)",
            ));
        }
        Ok(())
    }
}

impl std::fmt::Debug for SentinelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print passwords (the sentinel URLs may carry some).
        f.debug_struct("SentinelConfig")
            .field("sentinels", &self.sentinels.len())
            .field("name", &self.name)
            .field("db", &self.db)
            .finish()
    }
}

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
#[derive(Debug, Clone, PartialEq)]
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
        })
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::ErrorCode;

    #[test]
    fn whole_number_rejects_bad_values() {
        for bad in [f64::NAN, f64::INFINITY, -1.0, 0.0, 1.5, 2_147_483_648.0] {
            let err = whole_number("ttl", bad, 1).expect_err("must reject");
            assert_eq!(err.code, ErrorCode::OutOfRange, "{bad}");
        }
        assert_eq!(whole_number("ttl", 1.0, 1).ok(), Some(1));
        assert_eq!(whole_number("retryCount", 0.0, 0).ok(), Some(0));
    }

    #[test]
    fn leases_take_every_safe_integer() {
        let max = 9_007_199_254_740_991.0; // Number.MAX_SAFE_INTEGER
        assert_eq!(
            lease_millis("ttl", max, 1).ok(),
            Some(Duration::from_millis(MAX_LEASE_MS))
        );
        assert!(lease_millis("ttl", 2_147_483_648.0, 1).is_ok());
        for bad in [max + 1.0, max * 2.0, f64::INFINITY, 0.0, 0.5] {
            let err = lease_millis("ttl", bad, 1).expect_err("must reject");
            assert_eq!(err.code, ErrorCode::OutOfRange, "{bad}");
        }
        // Waits and timeouts keep the timer limit.
        assert!(millis("waitTimeout", 2_147_483_648.0, 0).is_err());
    }

    #[test]
    fn defaults_resolve() {
        let spec = AcquireOptions::default()
            .resolve()
            .expect("defaults are valid");
        assert_eq!(spec.ttl, DEFAULT_TTL);
        assert_eq!(spec.renew_interval, DEFAULT_TTL / 3);
        assert!(spec.auto_renew);
        assert_eq!(spec.retry_count, None);
    }

    #[test]
    fn renew_interval_must_be_below_ttl() {
        let opts = AcquireOptions {
            ttl: Some(Duration::from_millis(100)),
            renew_interval: Some(Duration::from_millis(100)),
            ..Default::default()
        };
        assert_eq!(
            opts.resolve().expect_err("rejected").code,
            ErrorCode::OutOfRange
        );
    }

    #[test]
    fn members_are_masters_or_clusters() {
        let cluster =
            |seeds: &[&str]| NodeSpec::Cluster(seeds.iter().map(|s| s.to_string()).collect());
        let mut cfg = ClientConfig::default();
        assert!(!cfg.has_cluster());
        cfg.nodes = vec!["redis://a".into(), cluster(&["redis://b", "redis://c"])];
        assert!(cfg.has_cluster());
        assert_eq!(cfg.node_count(), 2);
        assert!(cfg.validate().is_ok());
        cfg.nodes.push(cluster(&[]));
        let err = cfg.validate().expect_err("a cluster member needs a seed");
        assert_eq!(err.code, ErrorCode::InvalidArgValue);
        // waitReplicas: one plain master only, never a cluster member.
        for nodes in [
            vec![cluster(&["redis://b"])],
            vec!["redis://a".into(), cluster(&["redis://b"])],
        ] {
            cfg.nodes = nodes;
            let spec = AcquireOptions {
                wait_replicas: Some(1),
                ..Default::default()
            }
            .resolve()
            .expect("valid options");
            assert_eq!(
                cfg.check_spec(&spec).expect_err("refused").code,
                ErrorCode::InvalidArgValue
            );
        }
    }

    #[test]
    fn a_sentinel_master_is_one_node_and_stands_alone() {
        let sentinel = SentinelConfig {
            sentinels: vec!["redis://127.0.0.1:26379".into()],
            name: "mymaster".into(),
            ..Default::default()
        };
        let cfg = ClientConfig {
            nodes: Vec::new(),
            sentinel: Some(sentinel.clone()),
            ..ClientConfig::default()
        };
        assert!(cfg.validate().is_ok());
        assert_eq!((cfg.node_count(), cfg.quorum()), (1, 1));
        let with_nodes = ClientConfig {
            sentinel: Some(sentinel.clone()),
            ..ClientConfig::default()
        };
        let err = with_nodes.validate().expect_err("sentinel with nodes");
        assert!(
            err.message.contains("cannot be combined"),
            "{}",
            err.message
        );
        for (bad, name) in [
            (
                SentinelConfig {
                    sentinels: Vec::new(),
                    ..sentinel.clone()
                },
                "sentinel.sentinels",
            ),
            (
                SentinelConfig {
                    sentinels: vec!["rediss://127.0.0.1:26379".into()],
                    ..sentinel.clone()
                },
                "sentinel.sentinels",
            ),
            (
                SentinelConfig {
                    name: String::new(),
                    ..sentinel.clone()
                },
                "sentinel.name",
            ),
        ] {
            let err = bad.validate().expect_err(name);
            assert_eq!(err.code, ErrorCode::InvalidArgValue, "{name}");
            assert!(err.message.contains(name), "{}", err.message);
        }
        let secret = SentinelConfig {
            password: Some("s3cret".into()),
            sentinel_password: Some("s3cret".into()),
            ..sentinel
        };
        assert!(!format!("{secret:?}").contains("s3cret"));
    }

    #[test]
    fn node_timeout_is_a_share_of_ttl_with_several_nodes() {
        let mut cfg = ClientConfig::default();
        assert_eq!(
            cfg.node_timeout_for(Duration::from_secs(10)),
            DEFAULT_COMMAND_TIMEOUT
        );
        cfg.nodes = vec!["redis://a".into(), "redis://b".into(), "redis://c".into()];
        assert_eq!(cfg.quorum(), 2);
        assert_eq!(
            cfg.node_timeout_for(Duration::from_secs(10)),
            Duration::from_millis(500)
        );
        assert_eq!(
            cfg.drift_for(Duration::from_secs(10)),
            Duration::from_millis(102)
        );
        // A cluster's seeds are one lock node.
        cfg.nodes = vec![NodeSpec::Cluster(vec![
            "redis://a".into(),
            "redis://b".into(),
        ])];
        assert_eq!(cfg.quorum(), 1);
        assert_eq!(
            cfg.node_timeout_for(Duration::from_secs(10)),
            DEFAULT_COMMAND_TIMEOUT
        );
    }
}
