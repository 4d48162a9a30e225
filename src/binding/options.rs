//! Options as JavaScript passes them. Numbers arrive as doubles and are checked
//! by the core (`ERR_OUT_OF_RANGE` for NaN, fractions, negatives, too large).

use std::time::Duration;

use napi::Either;
use napi_derive::napi;

use crate::core::config::{self, lease_millis, millis, whole_number, ClientConfig, NodeSpec};
use crate::core::stats::StatsSnapshot;
use crate::core::{self as core, LockError};

/// How a `LockClient` reaches Redis, and the defaults for its locks.
#[napi(object, object_to_js = false)]
#[derive(Default)]
pub struct LockClientOptions {
    /// Redis URL of a single node: `redis://[user:password@]host:port[/db]` or
    /// `unix:///path/to/redis.sock`. The default value is `process.env.REDIS_URL`,
    /// else `redis://127.0.0.1:6379`.
    pub url: Option<String>,
    /// The independent lock nodes for Redlock (quorum = floor(N/2) + 1), each
    /// the URL of a Redis master or `{ cluster: [seed URLs] }` for a whole Redis
    /// Cluster, which counts as one node. With a cluster among them, all keys of
    /// one lock must share a hash slot (use a `{hash tag}`). Overrides `url`.
    pub nodes: Option<Vec<Either<String, ClusterNode>>>,
    /// Seed URLs of one Redis Cluster (`redis://host:port`, any few of its nodes):
    /// the shorthand for `nodes: [{ cluster }]`. The cluster is one lock node, not
    /// Redlock: each lock lives on the master owning its key's hash slot, and
    /// redirections and failovers are followed. All keys of one lock must share a
    /// hash slot (use a `{hash tag}`). Cannot be combined with `url` or `nodes`.
    /// The default value is no cluster.
    pub cluster: Option<Vec<String>>,
    /// A master found through Redis Sentinel: the sentinels are asked for it,
    /// and locks follow it to the replica promoted by a failover. One lock node,
    /// not Redlock. Cannot be combined with `url`, `nodes`, `cluster` or `tls`.
    /// The default value is no sentinel.
    pub sentinel: Option<SentinelOptions>,
    /// Prepended to every lock key in Redis. The default value is `''`.
    pub key_prefix: Option<String>,
    /// How long to wait for a connection to a node, in ms. The default value is 2000.
    pub connect_timeout: Option<f64>,
    /// How long to wait for a reply to a command, in ms. The default value is 1000.
    pub command_timeout: Option<f64>,
    /// How long one node may take to answer an acquire or renewal, in ms. The
    /// default value is `commandTimeout` for one node, and 5% of the TTL (at most
    /// `commandTimeout`) with several nodes.
    pub node_timeout: Option<f64>,
    /// Clock drift allowance as a share of the TTL: validity = ttl − elapsed −
    /// (ttl × driftFactor + 2 ms). The default value is 0.01.
    pub drift_factor: Option<f64>,
    /// Hand out fencing tokens (`lock.fence`): the acquire script also increments a
    /// counter per lock key (`{key}:fence`, same hash slot), kept in Redis for good.
    /// The default value is `false`.
    pub fencing: Option<bool>,
    /// Certificates for `rediss://` URLs (TLS). The default value is the system's
    /// trust store and no client certificate.
    pub tls: Option<TlsOptions>,
    /// Lease length in ms; the watchdog renews it every `ttl / 3`. The default value is 30000.
    pub ttl: Option<f64>,
    /// Retries after the first attempt while the lock is held by another owner
    /// (`Infinity` or -1: no limit but `waitTimeout`). The default value is `Infinity`.
    pub retry_count: Option<f64>,
    /// Longest pause between attempts, in ms: the holder's release notice (Redis
    /// pub/sub) ends it early for the first waiter of a key, and it never outlasts
    /// the holder's remaining TTL. The default value is 100.
    pub retry_delay: Option<f64>,
    /// Random extra pause of 0..retryJitter ms added to each `retryDelay`. The default value is 100.
    pub retry_jitter: Option<f64>,
    /// Longest total wait for a held lock, in ms. The default value is 10000.
    pub wait_timeout: Option<f64>,
    /// Longest time the watchdog keeps a lock alive, in ms; then the lock lapses
    /// and its signal aborts. The default value is no limit.
    pub max_hold: Option<f64>,
    /// Renewal period in ms. The default value is `ttl / 3`.
    pub renew_interval: Option<f64>,
    /// Whether the native watchdog renews locks until released. The default value is `true`.
    pub auto_renew: Option<bool>,
    /// Smallest validity (ms) an acquisition may come back with. The default value is 1.
    pub min_validity: Option<f64>,
    /// Replicas that should acknowledge each acquisition and manual extension
    /// (Redis `WAIT`, on a connection of its own; one master with replicas only).
    /// Best effort: `lock.replicas` tells how many did. The default value is 0 (no wait).
    pub wait_replicas: Option<f64>,
    /// Longest wait for those acknowledgements, in ms. The default value is 100.
    pub wait_replicas_timeout: Option<f64>,
}

/// TLS material for `rediss://` URLs, as PEM text.
#[napi(object, object_to_js = false)]
#[derive(Default)]
pub struct TlsOptions {
    /// CA certificate(s) to trust instead of the system's trust store.
    pub ca: Option<String>,
    /// Client certificate, for servers that require one (with `key`).
    pub cert: Option<String>,
    /// Client private key (with `cert`). Never logged.
    pub key: Option<String>,
}

/// How to find a master through Redis Sentinel.
#[napi(object, object_to_js = false)]
#[derive(Default)]
pub struct SentinelOptions {
    /// URLs of the sentinels, `redis://[user:password@]host:port`, asked in turn
    /// (required, at least one).
    pub sentinels: Option<Vec<String>>,
    /// The name the sentinels monitor the master under, e.g. `'mymaster'` (required).
    pub name: Option<String>,
    /// Username for the sentinels whose URL has none. The default value is none.
    pub sentinel_username: Option<String>,
    /// Password for the sentinels whose URL has none. The default value is none.
    pub sentinel_password: Option<String>,
    /// Username for the master (and the replica that replaces it). The default value is none.
    pub username: Option<String>,
    /// Password for the master (and the replica that replaces it). The default value is none.
    pub password: Option<String>,
    /// The master's database number. The default value is 0.
    pub db: Option<f64>,
}

impl SentinelOptions {
    fn to_core(&self) -> Result<config::SentinelConfig, LockError> {
        let cfg = config::SentinelConfig {
            sentinels: self.sentinels.clone().unwrap_or_default(),
            name: self.name.clone().unwrap_or_default(),
            sentinel_username: self.sentinel_username.clone(),
            sentinel_password: self.sentinel_password.clone(),
            username: self.username.clone(),
            password: self.password.clone(),
            db: match self.db {
                Some(db) => whole_number("sentinel.db", db, 0)? as i64,
                None => 0,
            },
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Settings of one acquisition; unset fields take the client's defaults.
#[napi(object, object_to_js = false)]
#[derive(Default)]
pub struct AcquireOptions {
    /// Lease length in ms (1 ..= `Number.MAX_SAFE_INTEGER`). The default value is the client's `ttl` (30000).
    pub ttl: Option<f64>,
    /// Retries after the first attempt while another owner holds the lock
    /// (`Infinity` or -1: no limit but `waitTimeout`). The default value is `Infinity`.
    pub retry_count: Option<f64>,
    /// Longest pause between attempts, in ms: the holder's release notice (Redis
    /// pub/sub) ends it early for the first waiter of a key, and it never outlasts
    /// the holder's remaining TTL. The default value is 100.
    pub retry_delay: Option<f64>,
    /// Random extra pause of 0..retryJitter ms per attempt. The default value is 100.
    pub retry_jitter: Option<f64>,
    /// Longest total wait in ms (`Infinity`: about 24.8 days, the longest timer);
    /// then the acquire rejects with `ERR_LOCK_TIMEOUT`. The default value is 10000.
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

/// Counters of a client since it was created.
#[napi(object)]
pub struct LockStats {
    /// Locks taken.
    pub acquired: f64,
    /// Attempts that found the lock held by another owner.
    pub contended: f64,
    /// Successful renewals and extensions.
    pub renewed: f64,
    /// Locks lost while held.
    pub lost: f64,
    /// Locks released by their holder.
    pub released: f64,
    /// Node failures seen (unreachable, timeout, error reply).
    pub errors: f64,
    /// Locks held right now.
    pub held: f64,
    /// Waits for a held lock that its release notice ended (rather than a retry timer).
    pub woken: f64,
}

impl From<StatsSnapshot> for LockStats {
    fn from(s: StatsSnapshot) -> Self {
        LockStats {
            acquired: s.acquired as f64,
            contended: s.contended as f64,
            renewed: s.renewed as f64,
            lost: s.lost as f64,
            released: s.released as f64,
            errors: s.errors as f64,
            held: s.held as f64,
            woken: s.woken as f64,
        }
    }
}

fn opt_millis(name: &str, v: Option<f64>, min: u64) -> Result<Option<Duration>, LockError> {
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

/// A Redis Cluster as one lock node of `nodes`.
#[napi(object, object_to_js = false)]
pub struct ClusterNode {
    /// Seed URLs of the cluster (`redis://host:port`, any few of its nodes).
    pub cluster: Vec<String>,
}

impl LockClientOptions {
    pub fn to_core(&self) -> Result<ClientConfig, LockError> {
        let mut cfg = ClientConfig::default();
        if let Some(sentinel) = &self.sentinel {
            if self.url.is_some() || self.nodes.is_some() || self.cluster.is_some() {
                return Err(LockError::invalid_value(
                    "sentinel",
                    "cannot be combined with url, nodes or cluster (the sentinels name the master)",
                ));
            }
            cfg.nodes = Vec::new();
            cfg.sentinel = Some(sentinel.to_core()?);
        } else if let Some(seeds) = &self.cluster {
            if self.url.is_some() || self.nodes.is_some() {
                return Err(LockError::invalid_value(
                    "cluster",
                    "cannot be combined with url or nodes (a cluster is reached through its seeds)",
                ));
            }
            cfg.nodes = vec![NodeSpec::Cluster(seeds.clone())];
        } else if let Some(nodes) = &self.nodes {
            cfg.nodes = nodes
                .iter()
                .map(|n| match n {
                    Either::A(url) => NodeSpec::Master(url.clone()),
                    Either::B(c) => NodeSpec::Cluster(c.cluster.clone()),
                })
                .collect();
        } else if let Some(url) = &self.url {
            cfg.nodes = vec![NodeSpec::Master(url.clone())];
        } else if let Some(url) = std::env::var(config::URL_ENV)
            .ok()
            .filter(|u| !u.is_empty())
        {
            cfg.nodes = vec![NodeSpec::Master(url)];
        }
        if let Some(prefix) = &self.key_prefix {
            cfg.key_prefix = prefix.clone();
        }
        if let Some(t) = opt_millis("connectTimeout", self.connect_timeout, 1)? {
            cfg.connect_timeout = t;
        }
        if let Some(t) = opt_millis("commandTimeout", self.command_timeout, 1)? {
            cfg.command_timeout = t;
        }
        cfg.node_timeout = opt_millis("nodeTimeout", self.node_timeout, 1)?;
        if let Some(d) = self.drift_factor {
            cfg.drift_factor = d;
        }
        cfg.fencing = self.fencing.unwrap_or(false);
        cfg.tls = self.tls.as_ref().map(|t| config::TlsConfig {
            ca: t.ca.as_ref().map(|v| v.clone().into_bytes()),
            cert: t.cert.as_ref().map(|v| v.clone().into_bytes()),
            key: t.key.as_ref().map(|v| v.clone().into_bytes()),
        });
        cfg.defaults = AcquireOptions {
            ttl: self.ttl,
            retry_count: self.retry_count,
            retry_delay: self.retry_delay,
            retry_jitter: self.retry_jitter,
            wait_timeout: self.wait_timeout,
            max_hold: self.max_hold,
            renew_interval: self.renew_interval,
            auto_renew: self.auto_renew,
            min_validity: self.min_validity,
            wait_replicas: self.wait_replicas,
            wait_replicas_timeout: self.wait_replicas_timeout,
        }
        .to_core()?;
        if cfg.key_prefix.len() > crate::core::keys::MAX_KEY_BYTES {
            return Err(LockError::out_of_range(
                "keyPrefix",
                &format!("at most {} bytes long", crate::core::keys::MAX_KEY_BYTES),
                cfg.key_prefix.len(),
            ));
        }
        Ok(cfg)
    }
}

/// What `inspect(key)` found, without changing anything.
#[napi(object)]
pub struct LockInspection {
    /// True when a quorum of nodes holds the key with one value.
    pub held: bool,
    /// The holder's remaining TTL in ms (the shortest among the quorum), or null.
    pub remaining_ms: Option<f64>,
    /// The holder's token, masked to its first 8 characters, or null.
    pub holder: Option<String>,
    /// The key's fence counter (the last token handed out), or null.
    pub fence: Option<f64>,
}

impl From<core::Inspection> for LockInspection {
    fn from(i: core::Inspection) -> Self {
        LockInspection {
            held: i.held,
            remaining_ms: i.remaining_ms.map(|v| v as f64),
            holder: i.holder,
            fence: i.fence.map(|v| v as f64),
        }
    }
}
