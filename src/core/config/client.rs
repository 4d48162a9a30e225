//! A client's settings: its nodes, timeouts, drift and defaults, checked
//! together, and the bounds they set for each lock (quorum, node timeout,
//! drift allowance); and what a lock node is ([`NodeSpec`]: one Redis
//! master, a Redis Cluster (one vote whose commands route by key), or a
//! master found through Redis Sentinel, [`SentinelConfig`]).

use std::time::Duration;

use super::{
    AcquireOptions, AcquireSpec, TlsConfig, DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_DRIFT_FACTOR, DEFAULT_URL, NODE_TIMEOUT_FLOOR, NODE_TIMEOUT_SHARE,
};
use crate::core::error::{LockError, Result};
use crate::core::{broken, quorum};

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
            .max(NODE_TIMEOUT_FLOOR.min(ttl / 3))
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

    /// An acquisition's options resolved against this client's defaults,
    /// checked against its deployment, with what its settings make of the
    /// lease (drift, node timeout) filled in.
    pub fn spec(&self, opts: &AcquireOptions) -> Result<AcquireSpec> {
        let mut spec = opts.or(&self.defaults).resolve()?;
        self.check_spec(&spec)?;
        spec.drift = self.drift_for(spec.ttl);
        spec.node_timeout = self.node_timeout_for(spec.ttl);
        Ok(spec)
    }

    /// What an acquisition's settings must fit in this deployment.
    pub fn check_spec(&self, spec: &AcquireSpec) -> Result<()> {
        // Several nodes: a node may take all of nodeTimeout while the others
        // answered; what is left of the lease must still be a validity.
        if let (true, Some(t)) = (self.node_count() > 1, self.node_timeout) {
            let budget = spec.ttl.saturating_sub(self.drift_for(spec.ttl));
            if t >= budget {
                return Err(LockError::out_of_range(
                    "nodeTimeout",
                    &format!(
                        "shorter than ttl minus its clock drift with several nodes ({} ms for a ttl of {} ms): one slow node would use up every lock's validity",
                        budget.as_millis(),
                        spec.ttl.as_millis()
                    ),
                    t.as_millis(),
                ));
            }
        }
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

// The lock nodes.

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
