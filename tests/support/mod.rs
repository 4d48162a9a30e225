//! Test support, by topology as redis-rs's does it: `single` is one real
//! `redis-server` process (the building block, killed by its PID on drop),
//! `redlock` independent masters, `cluster` a Redis Cluster, `replicas` a master
//! with a replica, `sentinel` that pair watched by three sentinels, `silent` a socket that accepts and never answers. Below: what
//! every test uses.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

pub mod cluster;
pub mod redlock;
pub mod replicas;
pub mod sentinel;
pub mod silent;
mod single;

pub use single::RedisServer;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lockdog::core::{AcquireOptions, Client, ClientConfig};

static NEXT_PREFIX: AtomicU64 = AtomicU64::new(0);

/// A client config over `servers` with a key prefix unique to this call, so
/// tests never see each other's keys.
pub fn config(servers: &[&RedisServer]) -> ClientConfig {
    let mut cfg = ClientConfig::default();
    cfg.nodes = servers.iter().map(|s| s.url().into()).collect();
    cfg.key_prefix = format!(
        "it{}:{}:",
        std::process::id(),
        NEXT_PREFIX.fetch_add(1, Ordering::Relaxed)
    );
    cfg
}

/// Acquire options with a ttl and no waiting on contention.
pub fn opts(ttl_ms: u64) -> AcquireOptions {
    let mut o = AcquireOptions::default();
    o.ttl = Some(Duration::from_millis(ttl_ms));
    o
}

/// Acquire options with a ttl and no automatic renewal.
pub fn unrenewed(ttl_ms: u64) -> AcquireOptions {
    let mut o = opts(ttl_ms);
    o.auto_renew = Some(false);
    o
}

/// Acquire options with a ttl that wait for a held lock up to `wait_ms` in all,
/// `delay_ms` plus up to `jitter_ms` between attempts.
pub fn waiting(ttl_ms: u64, wait_ms: u64, delay_ms: u64, jitter_ms: u64) -> AcquireOptions {
    let mut o = opts(ttl_ms);
    o.wait_timeout = Some(ms(wait_ms));
    o.retry_delay = Some(ms(delay_ms));
    o.retry_jitter = Some(ms(jitter_ms));
    o
}

/// The fixture most single-node tests start from: a redis-server, a client on
/// it with a key prefix of its own, and the full key of `name` under that prefix.
pub fn one_node(name: &str) -> (RedisServer, Client, String) {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let key = format!("{}{name}", cfg.key_prefix);
    let locks = Client::new(cfg, None).expect("valid client config");
    (server, locks, key)
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Polls `check` until it is true, failing with `what` once `within` has passed.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if check().await {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not true within {within:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Awaits `fut`, failing with `what` if it takes longer than `within`.
pub async fn within<T>(within: Duration, what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(within, fut)
        .await
        .unwrap_or_else(|_| panic!("did not finish within {within:?}: {what}"))
}
