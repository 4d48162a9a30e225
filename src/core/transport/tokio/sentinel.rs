//! A master found through Redis Sentinel. Every sentinel is asked (`SENTINEL
//! MASTER <name>`, side by side); the address with the newest configuration
//! epoch is used once `ROLE` confirms it is a master (a sentinel that has not
//! heard of a failover yet still names the old master). A connection is never
//! reopened to the same address: it turns stale when it breaks, when the server
//! answers `READONLY` (it was demoted), or when a sentinel announces
//! `+switch-master` to another address, and the next caller resolves again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind,
    IntoConnectionInfo, Pipeline, ProtocolVersion, RedisConnectionInfo, RedisError, RedisFuture,
    RedisResult, Value,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::core::base;

/// How long sentinels that have not answered yet may still do so once a
/// majority did (a sentinel that lags may name an older master).
const STRAGGLER_GRACE: Duration = Duration::from_millis(20);

/// The sentinels of one monitored master and how to reach that master.
pub(super) struct Sentinel {
    /// The name the sentinels monitor the master under.
    pub(super) service: String,
    /// The sentinels, with their own credentials.
    sentinels: Vec<ConnectionInfo>,
    /// Credentials, database and protocol for the master.
    master: RedisConnectionInfo,
    timeout: Duration,
    /// Bumped whenever the master may have changed: a connection opened at an
    /// older epoch is stale.
    epoch: AtomicU64,
    /// The master's address as last resolved, with the configuration epoch
    /// of the sentinel that named it.
    resolved: Mutex<Option<Named>>,
    watching: AtomicBool,
    stop: CancellationToken,
}

/// A master's address as one sentinel names it.
#[derive(Clone, PartialEq)]
struct Named {
    host: String,
    port: u16,
    config_epoch: u64,
}

impl Named {
    fn same_addr(&self, other: &Named) -> bool {
        self.host == other.host && self.port == other.port
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A connection to the master a sentinel named, that turns stale (and is then
/// replaced by a fresh resolution) instead of reconnecting to the same address.
#[derive(Clone)]
pub struct MasterConnection {
    con: MultiplexedConnection,
    stale: Arc<AtomicBool>,
    epoch: u64,
}

impl MasterConnection {
    fn note_error(&self, e: &RedisError) {
        let readonly = e.code() == Some("READONLY") || e.to_string().contains("READONLY");
        if readonly || e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() {
            self.stale.store(true, Ordering::Release);
        }
    }

    fn note_value(&self, v: &Value) {
        if let Value::ServerError(e) = v {
            if e.code() == "READONLY" || e.details().is_some_and(|d| d.contains("READONLY")) {
                self.stale.store(true, Ordering::Release);
            }
        }
    }
}

impl ConnectionLike for MasterConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let reply = self.con.req_packed_command(cmd).await;
            match &reply {
                Ok(v) => self.note_value(v),
                Err(e) => self.note_error(e),
            }
            reply
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let reply = self.con.req_packed_commands(cmd, offset, count).await;
            match &reply {
                Ok(values) => values.iter().for_each(|v| self.note_value(v)),
                Err(e) => self.note_error(e),
            }
            reply
        })
    }

    fn get_db(&self) -> i64 {
        self.con.get_db()
    }
}

impl Sentinel {
    pub(super) fn new(
        service: String,
        sentinels: Vec<ConnectionInfo>,
        master: RedisConnectionInfo,
        timeout: Duration,
    ) -> Sentinel {
        Sentinel {
            service,
            sentinels,
            master,
            timeout,
            epoch: AtomicU64::new(0),
            resolved: Mutex::new(None),
            watching: AtomicBool::new(false),
            stop: CancellationToken::new(),
        }
    }

    /// The current epoch: connections opened before a later one are stale.
    pub(super) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Marks every connection opened so far stale.
    fn master_changed(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    pub(super) fn is_stale(&self, con: &MasterConnection) -> bool {
        con.stale.load(Ordering::Acquire) || con.epoch != self.epoch()
    }

    /// Stops listening to the sentinels.
    pub(super) fn close(&self) {
        self.stop.cancel();
    }

    /// Resolves the master and connects to it (the shared command connection).
    pub(super) async fn open(self: &Arc<Self>) -> RedisResult<MasterConnection> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(None);
        let (con, epoch) = self.open_with(ProtocolVersion::RESP2, config).await?;
        self.watch();
        Ok(MasterConnection {
            con,
            stale: Arc::default(),
            epoch,
        })
    }

    /// A connection of its own to the current master, with `config` (push
    /// messages, for notices) and `protocol`; with the epoch it belongs to.
    pub(super) async fn open_with(
        &self,
        protocol: ProtocolVersion,
        config: AsyncConnectionConfig,
    ) -> RedisResult<(MultiplexedConnection, u64)> {
        let epoch = self.epoch();
        let ask = self.ask_config();
        let mut asking: FuturesUnordered<_> = self
            .sentinels
            .iter()
            .map(|info| named_master(info, &self.service, &ask))
            .collect();
        let majority = self.sentinels.len() / 2 + 1;
        let mut answered = 0;
        let mut deadline = Instant::now() + self.timeout;
        let mut last = None;
        let mut named: Vec<Named> = Vec::new();
        // Every answer within the budget, but a paused sentinel does not hold up
        // the others: once a majority answered, the rest get a short grace.
        while let Ok(Some(answer)) = tokio::time::timeout_at(deadline, asking.next()).await {
            answered += 1;
            match answer {
                Ok(n) if !named.iter().any(|m| m.same_addr(&n)) => named.push(n),
                Ok(_) => {}
                Err(e) => last = Some(e),
            }
            if answered >= majority && !named.is_empty() {
                deadline = deadline.min(Instant::now() + STRAGGLER_GRACE);
            }
        }
        drop(asking);
        // The newest configuration first: it knows of the latest failover.
        named.sort_by_key(|n| std::cmp::Reverse(n.config_epoch));
        for n in named {
            let master = ConnectionAddr::Tcp(n.host.clone(), n.port)
                .into_connection_info()?
                .set_redis_settings(self.master.clone().set_protocol(protocol));
            match verified_master(master, &config).await {
                Ok(con) => {
                    let mut resolved = base::lock(&self.resolved);
                    let moved = resolved.as_ref().is_some_and(|r| !r.same_addr(&n));
                    *resolved = Some(n);
                    if moved {
                        // Another master than the last one: older connections go.
                        self.master_changed();
                        return Ok((con, self.epoch()));
                    }
                    // A switch announced meanwhile makes this one stale at once.
                    return Ok((con, epoch));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            RedisError::from((ErrorKind::EmptySentinelList, "no sentinel configured"))
        }))
    }

    fn ask_config(&self) -> AsyncConnectionConfig {
        AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
    }

    /// A sentinel named `n` (in an announcement or an answer): if that is
    /// another master than the one resolved, and not an older configuration,
    /// connections go stale.
    fn heard(&self, n: &Named) {
        let resolved = base::lock(&self.resolved);
        if resolved
            .as_ref()
            .is_some_and(|r| !r.same_addr(n) && n.config_epoch >= r.config_epoch)
        {
            self.master_changed();
        }
    }

    /// Listens (once per node, in the background) on every sentinel for
    /// `+switch-master`: the sentinels learn of a failover one after another.
    fn watch(self: &Arc<Self>) {
        if self.watching.swap(true, Ordering::AcqRel) {
            return;
        }
        for info in &self.sentinels {
            let weak = Arc::downgrade(self);
            let stop = self.stop.clone();
            let info = info.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = stop.cancelled() => {}
                    _ = watch(weak, info) => {}
                }
            });
        }
    }
}

/// One sentinel's watcher; ends when the node is gone.
async fn watch(weak: Weak<Sentinel>, info: ConnectionInfo) {
    let mut pause = Duration::from_millis(50);
    loop {
        let Some(s) = weak.upgrade() else { return };
        let service = s.service.clone();
        let timeout = s.timeout;
        drop(s);
        let subscribed = async {
            let client = Client::open(info.clone())?;
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe("+switch-master").await?;
            RedisResult::Ok(pubsub)
        };
        if let Ok(Ok(mut pubsub)) = tokio::time::timeout(timeout, subscribed).await {
            pause = Duration::from_millis(50);
            // A switch may have happened while nobody listened here.
            let Some(s) = weak.upgrade() else { return };
            if let Ok(n) = named_master(&info, &service, &s.ask_config()).await {
                s.heard(&n);
            }
            drop(s);
            let mut messages = pubsub.on_message();
            while let Some(msg) = messages.next().await {
                // "<name> <old ip> <old port> <new ip> <new port>"
                let payload: String = msg.get_payload().unwrap_or_default();
                let words: Vec<&str> = payload.split(' ').collect();
                let [name, _, _, host, port] = words.as_slice() else {
                    continue;
                };
                if *name != service {
                    continue;
                }
                let Some(s) = weak.upgrade() else { return };
                s.heard(&Named {
                    host: host.to_string(),
                    port: port.parse().unwrap_or(0),
                    // An announcement is news: newer than what was resolved.
                    config_epoch: u64::MAX,
                });
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// Asks one sentinel where the master `service` is (`SENTINEL MASTER`).
async fn named_master(
    info: &ConnectionInfo,
    service: &str,
    config: &AsyncConnectionConfig,
) -> RedisResult<Named> {
    let client = Client::open(info.clone())?;
    let mut con = client
        .get_multiplexed_async_connection_with_config(config)
        .await?;
    let mut cmd = redis::cmd("SENTINEL");
    cmd.arg("MASTER").arg(service);
    let fields: HashMap<String, String> = cmd.query_async(&mut con).await?;
    let host = fields.get("ip").cloned();
    let port = fields.get("port").and_then(|p| p.parse::<u16>().ok());
    match (host, port) {
        (Some(host), Some(port)) => Ok(Named {
            host,
            port,
            config_epoch: fields
                .get("config-epoch")
                .and_then(|e| e.parse().ok())
                .unwrap_or(0),
        }),
        _ => Err(RedisError::from((
            ErrorKind::MasterNameNotFoundBySentinel,
            "the sentinel gave no master address",
        ))),
    }
}

/// Connects to `master` and checks with `ROLE` that it is a master.
async fn verified_master(
    master: ConnectionInfo,
    config: &AsyncConnectionConfig,
) -> RedisResult<MultiplexedConnection> {
    let client = Client::open(master)?;
    let mut con = client
        .get_multiplexed_async_connection_with_config(config)
        .await?;
    let role: Vec<Value> = redis::cmd("ROLE").query_async(&mut con).await?;
    match role.first() {
        Some(Value::BulkString(role)) if role.as_slice() == b"master" => Ok(con),
        Some(Value::SimpleString(role)) if role == "master" => Ok(con),
        _ => Err(RedisError::from((
            ErrorKind::MasterNameNotFoundBySentinel,
            "the address the sentinel gave is not a master (yet)",
        ))),
    }
}
