//! A client's options: how it reaches Redis (a URL, several nodes, a
//! cluster, Sentinel, TLS) and the defaults for its locks.

use napi::Either;
use napi_derive::napi;

use super::acquire::opt_millis;
use super::AcquireOptions;
use crate::core::config::{self, whole_number, ClientConfig, NodeSpec};
use crate::core::LockError;

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
    /// How long to wait for a reply to a command, in ms, from when the command
    /// is written to the connection (on the runtime path: from the
    /// connection's last reply while replies keep coming; a Cluster's
    /// commands from their send). The default value is 1000.
    pub command_timeout: Option<f64>,
    /// How long one node may take to answer an acquire or renewal, in ms. The
    /// default value is `commandTimeout` for one node, and 5% of the TTL with
    /// several nodes: at least 50 ms (or a third of a TTL under 150 ms), at most
    /// `commandTimeout`.
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
    /// Random extra pause of 0..retryJitter ms added to each `retryDelay`. The default value is 100.
    pub retry_jitter: Option<f64>,
    /// Longest total wait for a held lock or through an outage, in ms. The default value is 10000.
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
        if cfg.key_prefix.len() > crate::core::model::MAX_KEY_BYTES {
            return Err(LockError::out_of_range(
                "keyPrefix",
                &format!("at most {} bytes long", crate::core::model::MAX_KEY_BYTES),
                cfg.key_prefix.len(),
            ));
        }
        Ok(cfg)
    }
}
