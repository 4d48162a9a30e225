//! A master found through Redis Sentinel. The sentinels are asked in turn
//! (`SENTINEL get-master-addr-by-name`) and the address they give is used only
//! once `ROLE` confirms it is a master. A connection is never reopened to the
//! same address: it turns stale when it breaks, when the server answers
//! `READONLY` (it was demoted), or when a sentinel announces `+switch-master`,
//! and the next caller resolves the master again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind,
    IntoConnectionInfo, Pipeline, ProtocolVersion, RedisConnectionInfo, RedisError, RedisFuture,
    RedisResult, Value,
};
use tokio_util::sync::CancellationToken;

use crate::core::sync;

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
    /// The master's address as last resolved.
    resolved: Mutex<Option<(String, u16)>>,
    watching: AtomicBool,
    stop: CancellationToken,
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
        let ask = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        let mut last = None;
        for info in &self.sentinels {
            let addr = match master_addr(info, &self.service, &ask).await {
                Ok(addr) => addr,
                Err(e) => {
                    last = Some(e);
                    continue;
                }
            };
            let master = ConnectionAddr::Tcp(addr.0.clone(), addr.1)
                .into_connection_info()?
                .set_redis_settings(self.master.clone().set_protocol(protocol));
            match verified_master(master, &config).await {
                Ok(con) => {
                    let mut resolved = sync::lock(&self.resolved);
                    let moved = resolved.as_ref().is_some_and(|r| *r != addr);
                    *resolved = Some(addr);
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

    /// Listens (once per node, in the background) for `+switch-master` on one
    /// sentinel at a time, moving to the next when it goes away.
    fn watch(self: &Arc<Self>) {
        if self.watching.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(self);
        let stop = self.stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = watch(weak) => {}
            }
        });
    }

    /// After (re)subscribing: a switch may have happened while nobody listened.
    async fn check_resolved(&self, info: &ConnectionInfo) {
        let ask = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        if let Ok(addr) = master_addr(info, &self.service, &ask).await {
            let resolved = sync::lock(&self.resolved);
            if resolved.as_ref().is_some_and(|r| *r != addr) {
                self.master_changed();
            }
        }
    }
}

/// The watcher's loop; ends when the node is gone.
async fn watch(weak: Weak<Sentinel>) {
    let mut next = 0usize;
    let mut pause = Duration::from_millis(50);
    loop {
        let Some(s) = weak.upgrade() else { return };
        let info = s.sentinels[next % s.sentinels.len()].clone();
        let service = s.service.clone();
        let timeout = s.timeout;
        drop(s);
        next += 1;
        let subscribed = async {
            let client = Client::open(info.clone())?;
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe("+switch-master").await?;
            RedisResult::Ok(pubsub)
        };
        if let Ok(Ok(mut pubsub)) = tokio::time::timeout(timeout, subscribed).await {
            pause = Duration::from_millis(50);
            match weak.upgrade() {
                Some(s) => s.check_resolved(&info).await,
                None => return,
            }
            let mut messages = pubsub.on_message();
            while let Some(msg) = messages.next().await {
                // "<name> <old ip> <old port> <new ip> <new port>"
                let payload: String = msg.get_payload().unwrap_or_default();
                if payload.split(' ').next() == Some(service.as_str()) {
                    match weak.upgrade() {
                        Some(s) => s.master_changed(),
                        None => return,
                    }
                }
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// Asks one sentinel where the master `service` is.
async fn master_addr(
    info: &ConnectionInfo,
    service: &str,
    config: &AsyncConnectionConfig,
) -> RedisResult<(String, u16)> {
    let client = Client::open(info.clone())?;
    let mut con = client
        .get_multiplexed_async_connection_with_config(config)
        .await?;
    let mut cmd = redis::cmd("SENTINEL");
    cmd.arg("get-master-addr-by-name").arg(service);
    let reply: Option<(String, String)> = cmd.query_async(&mut con).await?;
    let Some((host, port)) = reply else {
        return Err(RedisError::from((
            ErrorKind::MasterNameNotFoundBySentinel,
            "the sentinel does not monitor this master name",
        )));
    };
    let port = port.parse::<u16>().map_err(|_| {
        RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "the sentinel gave a master address without a valid port",
        ))
    })?;
    Ok((host, port))
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
