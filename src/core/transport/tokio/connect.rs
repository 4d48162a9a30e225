//! From configuration to a [`Node`], without I/O: URL schemes, TLS material and
//! cluster seeds. A malformed URL is an `ERR_INVALID_ARG_VALUE` that never
//! echoes a password.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManagerConfig;
use redis::cluster::ClusterClientBuilder;
use redis::{
    Client, ClientTlsConfig, ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo,
    TlsCertificates,
};

use super::sentinel::Sentinel;
use super::{Node, Target};
use crate::core::config::{ClientConfig, NodeSpec, SentinelConfig, TlsConfig};
use crate::core::error::{LockError, Result};

/// What a cluster node's name starts with, before its seeds.
const CLUSTER_PREFIX: &str = "cluster ";

/// One member of `cfg`'s quorum (no I/O).
pub(super) fn for_spec(spec: &NodeSpec, cfg: &ClientConfig) -> Result<Node> {
    match spec {
        NodeSpec::Master(url) => for_url(url, cfg.tls.as_ref(), cfg.connect_timeout),
        NodeSpec::Cluster(seeds) => for_cluster(
            seeds,
            cfg.tls.as_ref(),
            cfg.connect_timeout,
            cfg.command_timeout,
        ),
    }
}

/// The `host:port` addresses (or socket paths) this node was given: a
/// master's one, a cluster's seeds.
pub(super) fn addresses(node: &Node) -> Vec<&str> {
    match node.name.strip_prefix(CLUSTER_PREFIX) {
        Some(seeds) => seeds.split(',').collect(),
        None => vec![node.name.as_str()],
    }
}

/// A single Redis master at `url` (parsed here; connected on first use).
pub(super) fn for_url(
    url: &str,
    tls: Option<&TlsConfig>,
    connect_timeout: Duration,
) -> Result<Node> {
    let scheme_ok = ["redis://", "rediss://", "unix://", "redis+unix://"]
        .iter()
        .any(|s| url.starts_with(s));
    if !scheme_ok {
        return Err(LockError::invalid_value(
            "url",
            "must start with redis://, rediss:// or unix://",
        ));
    }
    let client = open_client(url, tls)?;
    let name = addr_name(&client);
    // No response timeout of redis-rs's own: every call on this connection
    // is already bounded by ours (`ops::bounded`), and a second timer per
    // command only costs wake-ups. (A timeout never triggers a reconnect.)
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(connect_timeout))
        .set_response_timeout(None)
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(20))
        .set_max_delay(Duration::from_millis(200));
    Ok(Node::new(
        name,
        Target::Single(client, config),
        connect_timeout,
    ))
}

/// A whole Redis Cluster as one node, reached through its seed `urls` (no
/// I/O). Commands route by their first key; redirections and failovers are
/// followed within `command_timeout`.
pub(super) fn for_cluster(
    urls: &[String],
    tls: Option<&TlsConfig>,
    connect_timeout: Duration,
    command_timeout: Duration,
) -> Result<Node> {
    let mut names = Vec::with_capacity(urls.len());
    for url in urls {
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            return Err(LockError::invalid_value(
                "cluster",
                "must list redis:// or rediss:// URLs",
            ));
        }
        // Parsed here only to check the URL and name the node.
        names.push(addr_name(&open_client(url, None)?));
    }
    let mut builder = ClusterClientBuilder::new(urls.iter().map(String::as_str))
        .connection_timeout(connect_timeout)
        .response_timeout(command_timeout)
        .overall_response_timeout(Some(command_timeout))
        // A few quick retries ride out a failover's redirections and refreshes.
        .retries(3)
        .min_retry_wait(10)
        .max_retry_wait(100);
    if let Some(tls) = tls {
        if urls.iter().any(|u| u.starts_with("rediss://")) {
            install_crypto_provider();
            builder = builder.certs(TlsCertificates {
                client_tls: client_tls(tls)?,
                root_cert: tls.ca.clone(),
            });
        }
    }
    let client = builder.build().map_err(|e| {
        LockError::invalid_value(
            "cluster",
            &format!("is not a usable list of cluster URLs ({})", e.category()),
        )
    })?;
    Ok(Node::new(
        format!("{CLUSTER_PREFIX}{}", names.join(",")),
        Target::Cluster(client),
        connect_timeout,
    ))
}

/// The master that the sentinels of `cfg` name (no I/O): resolved on first
/// use and again after a failover.
pub(super) fn for_sentinel(cfg: &SentinelConfig, connect_timeout: Duration) -> Result<Node> {
    cfg.validate()?;
    let mut sentinels = Vec::with_capacity(cfg.sentinels.len());
    let mut names = Vec::with_capacity(cfg.sentinels.len());
    for url in &cfg.sentinels {
        let info = url.as_str().into_connection_info().map_err(|e| {
            LockError::invalid_value(
                "sentinel.sentinels",
                &format!("is not a usable list of sentinel URLs ({})", e.category()),
            )
        })?;
        let mut auth = info.redis_settings().clone();
        if let (None, Some(user)) = (auth.username(), &cfg.sentinel_username) {
            auth = auth.set_username(user);
        }
        if let (None, Some(password)) = (auth.password(), &cfg.sentinel_password) {
            auth = auth.set_password(password);
        }
        names.push(info.addr().to_string());
        sentinels.push(info.set_redis_settings(auth));
    }
    let mut master = RedisConnectionInfo::default().set_db(cfg.db);
    if let Some(user) = &cfg.username {
        master = master.set_username(user);
    }
    if let Some(password) = &cfg.password {
        master = master.set_password(password);
    }
    let sentinel = Sentinel::new(cfg.name.clone(), sentinels, master, connect_timeout);
    Ok(Node::new(
        format!("sentinel {} ({})", sentinel.service, names.join(",")),
        Target::Sentinel(Arc::new(sentinel)),
        connect_timeout,
    ))
}

/// Parses one node URL (no I/O), with TLS material for `rediss://`.
fn open_client(url: &str, tls: Option<&TlsConfig>) -> Result<Client> {
    let opened = match tls {
        Some(tls) if url.starts_with("rediss://") => {
            install_crypto_provider();
            Client::build_with_tls(
                url,
                TlsCertificates {
                    client_tls: client_tls(tls)?,
                    root_cert: tls.ca.clone(),
                },
            )
        }
        _ => {
            if url.starts_with("rediss://") {
                install_crypto_provider();
            }
            Client::open(url)
        }
    };
    opened.map_err(|e| {
        LockError::invalid_value(
            "url",
            &format!("is not a usable Redis URL ({})", e.category()),
        )
    })
}

fn client_tls(tls: &TlsConfig) -> Result<Option<ClientTlsConfig>> {
    match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => Ok(Some(ClientTlsConfig {
            client_cert: cert.clone(),
            client_key: key.clone(),
        })),
        (None, None) => Ok(None),
        _ => Err(LockError::invalid_value(
            "tls",
            "needs both cert and key for a client certificate",
        )),
    }
}

/// `host:port` or the socket path of a parsed URL.
fn addr_name(client: &Client) -> String {
    match client.get_connection_info().addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{host}:{port}")
        }
        ConnectionAddr::Unix(path) => path.display().to_string(),
        _ => "redis".to_string(),
    }
}

/// rustls needs one process-wide crypto provider; lockdog ships `ring`.
fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err only means another library installed one first: that one serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
