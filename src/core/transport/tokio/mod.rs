//! One lock node: a Redis master, a whole Redis Cluster or the master Redis
//! Sentinel names, its shared, auto-reconnecting connection (opened lazily, on
//! first use) and the lock operations on it, each bounded by a timeout and
//! reduced to a [`NodeAnswer`].
//!
//! `connect` parses URLs and TLS material, `sentinel` finds and follows a
//! Sentinel-named master, `ops` runs the operations of `core::ops` (and
//! `renewals` the watchdog's batches), `reply` reads redis-rs results as
//! their replies, `notices` subscribes to
//! release notices and `acked` writes and `WAIT`s for replicas.

mod acked;
pub mod collect;
mod connect;
mod notices;
mod ops;
mod permits;
mod renewals;
pub mod reply;
mod sentinel;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt, Shared};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Client, Cmd, Pipeline, RedisFuture, Value};

use crate::core::base;
use crate::core::config::{ClientConfig, NodeSpec, SentinelConfig};
use crate::core::error::{Fault, NodeAnswer};
use reply::Pace;

pub use crate::core::ops::permits::SlotReply;
pub use crate::core::ops::renew::Renewal;
pub use notices::NoticeSink;
pub use sentinel::MasterConnection;

/// What a node connects to.
#[derive(Clone)]
enum Target {
    Single(Client, ConnectionManagerConfig),
    /// A Redis Cluster: one logical node whose commands route by their first key.
    Cluster(ClusterClient),
    /// The master a set of Redis Sentinels names, followed across failovers.
    Sentinel(Arc<sentinel::Sentinel>),
}

/// A node's shared connection: one master's, or a cluster's (which follows
/// MOVED/ASK redirections and refreshes its slot map after a failover).
#[derive(Clone)]
pub enum Connection {
    Single(ConnectionManager, Pace),
    Cluster(ClusterConnection),
    Sentinel(MasterConnection, Pace),
}

impl Connection {
    fn single(c: ConnectionManager) -> Connection {
        Connection::Single(c, Pace::default())
    }

    fn sentinel(c: MasterConnection) -> Connection {
        Connection::Sentinel(c, Pace::default())
    }

    /// What bounds this connection's commands (see [`reply::within`]); none
    /// for a cluster, whose commands go to several sockets.
    pub(super) fn pace(&self) -> Option<Pace> {
        match self {
            Connection::Single(_, pace) | Connection::Sentinel(_, pace) => Some(pace.clone()),
            Connection::Cluster(_) => None,
        }
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c, _) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
            Connection::Sentinel(c, _) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c, _) => c.req_packed_commands(cmd, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(cmd, offset, count),
            Connection::Sentinel(c, _) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c, _) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
            Connection::Sentinel(c, _) => c.get_db(),
        }
    }
}

/// A lock node and its lazily opened, shared connection.
pub struct Node {
    /// `host:port` (or the socket path), `cluster host:port,…` for a cluster's
    /// seeds, or `sentinel name (host:port,…)`: safe to print, never carries
    /// credentials.
    pub name: String,
    target: Target,
    connect_timeout: Duration,
    current: RwLock<Option<Connection>>,
    /// The scripts sent on `current` so far (one bit each, see
    /// `scripts::source_of`): the first call of each goes as EVAL.
    scripts_sent: AtomicU32,
    /// The connect in progress, shared by every caller waiting for it. It runs
    /// as its own task, so a caller that stops waiting does not cancel it.
    connecting: Mutex<Option<Connecting>>,
    /// Shared with connects in progress: one that completes after the node
    /// closed drops its connection.
    closed: Arc<AtomicBool>,
    /// A second connection, opened when a caller first waits for a key held
    /// here, that only subscribes to release notices (RESP3 push messages).
    notices: tokio::sync::Mutex<notices::Notices>,
    /// Connections of their own for writes that `WAIT` for replicas: WAIT blocks
    /// the connection it runs on and counts the writes sent before it there.
    acked: acked::Pool,
    /// Operations in flight on the shared connection, at most
    /// [`WINDOW`]: one waiting for a place waits without its timeout
    /// running, so a burst (a `Promise.all` of 300,000 releases) is not
    /// failed for the time it spends behind the client's own queue.
    window: tokio::sync::Semaphore,
}

/// Operations in flight at once on a node's shared connection.
pub const WINDOW: usize = 2_048;

type Connecting = Shared<BoxFuture<'static, Result<Connection, NodeAnswer>>>;

impl Node {
    /// One member of `cfg`'s quorum (no I/O; see `connect`).
    pub fn for_spec(spec: &NodeSpec, cfg: &ClientConfig) -> crate::core::error::Result<Node> {
        connect::for_spec(spec, cfg)
    }

    /// The master that the sentinels of `cfg` name (no I/O): resolved on first
    /// use and again after a failover.
    pub fn for_sentinel(
        cfg: &SentinelConfig,
        connect_timeout: Duration,
    ) -> crate::core::error::Result<Node> {
        connect::for_sentinel(cfg, connect_timeout)
    }

    /// The `host:port` addresses (or socket paths) this node was given: a
    /// master's one, a cluster's seeds.
    pub fn addresses(&self) -> Vec<&str> {
        connect::addresses(self)
    }

    fn new(name: String, target: Target, connect_timeout: Duration) -> Node {
        Node {
            name,
            target,
            connect_timeout,
            current: RwLock::new(None),
            scripts_sent: AtomicU32::new(0),
            window: tokio::sync::Semaphore::new(WINDOW),
            connecting: Mutex::new(None),
            closed: Arc::new(AtomicBool::new(false)),
            notices: tokio::sync::Mutex::new(notices::Notices::Unused),
            acked: Default::default(),
        }
    }

    /// True for a Redis Cluster, where one pipeline cannot span hash slots.
    pub fn is_cluster(&self) -> bool {
        matches!(self.target, Target::Cluster(_))
    }

    /// Where a plain (no TLS, RESP2) single master listens, with its
    /// credentials and database: what the fast path may connect to itself.
    pub fn plain_info(&self) -> Option<redis::ConnectionInfo> {
        let Target::Single(client, _) = &self.target else {
            return None;
        };
        let info = client.get_connection_info();
        let plain = matches!(
            info.addr(),
            redis::ConnectionAddr::Tcp(..) | redis::ConnectionAddr::Unix(_)
        );
        let resp2 = !info.redis_settings().protocol().supports_resp3();
        (plain && resp2).then(|| info.clone())
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// True for a connection that must not be used again: one to a master
    /// Sentinel no longer names (it is then resolved anew).
    fn is_stale(&self, con: &Connection) -> bool {
        match (&self.target, con) {
            (Target::Sentinel(s), Connection::Sentinel(c, _)) => s.is_stale(c),
            _ => false,
        }
    }

    /// The shared connection, opened on first use within the connect timeout.
    pub async fn connection(&self) -> Result<Connection, NodeAnswer> {
        let shared = base::read(&self.current).clone();
        if let Some(con) = shared {
            if !self.is_stale(&con) {
                return Ok(con);
            }
            let mut current = base::write(&self.current);
            if current.as_ref().is_some_and(|c| self.is_stale(c)) {
                *current = None;
            }
        }
        if self.is_closed() {
            return Err(NodeAnswer::Unreachable("the client is closed".into()));
        }
        let pending = {
            let mut slot = base::lock(&self.connecting);
            match &*slot {
                Some(pending) => pending.clone(),
                None => {
                    let (target, timeout) = (self.target.clone(), self.connect_timeout);
                    let closed = self.closed.clone();
                    let task = tokio::spawn(async move {
                        let con = open(target, timeout).await?;
                        if closed.load(Ordering::Acquire) {
                            return Err(NodeAnswer::Unreachable("the client is closed".into()));
                        }
                        Ok(con)
                    });
                    let pending: Connecting = async move {
                        task.await.unwrap_or_else(|_| {
                            Err(NodeAnswer::Unreachable("the connect task failed".into()))
                        })
                    }
                    .boxed()
                    .shared();
                    *slot = Some(pending.clone());
                    pending
                }
            }
        };
        let result = pending.clone().await;
        {
            let mut slot = base::lock(&self.connecting);
            if slot.as_ref().is_some_and(|p| p.ptr_eq(&pending)) {
                *slot = None; // done: the next caller reuses the connection or tries anew
            }
        }
        if let Ok(con) = &result {
            let mut current = base::write(&self.current);
            if current.is_none() && !self.is_closed() {
                self.scripts_sent.store(0, Ordering::Release);
                *current = Some(con.clone());
            }
        }
        result
    }

    /// [`Node::connection`], waiting at most `timeout` (the connect goes on).
    pub async fn connection_within(&self, timeout: Duration) -> Result<Connection, NodeAnswer> {
        match tokio::time::timeout(timeout, self.connection()).await {
            Ok(result) => result,
            Err(_) => Err(NodeAnswer::Timeout),
        }
    }

    /// Drops the shared connection for good; its socket closes once in-flight
    /// calls finish.
    pub fn disconnect(&self) {
        self.closed.store(true, Ordering::Release);
        *base::write(&self.current) = None;
        // A connect whose callers all stopped waiting keeps its connection
        // in the shared result: let it go too.
        *base::lock(&self.connecting) = None;
        if let Target::Sentinel(s) = &self.target {
            s.close();
        }
        if let Ok(mut notices) = self.notices.try_lock() {
            *notices = notices::Notices::Unsupported;
        }
        self.acked.clear();
    }
}

/// Opens a node's connection within `timeout`.
async fn open(target: Target, timeout: Duration) -> Result<Connection, NodeAnswer> {
    let opening: BoxFuture<'_, redis::RedisResult<Connection>> = match &target {
        Target::Single(client, config) => Box::pin(async move {
            ConnectionManager::new_with_config(client.clone(), config.clone())
                .await
                .map(Connection::single)
        }),
        Target::Cluster(client) => {
            Box::pin(async move { client.get_async_connection().await.map(Connection::Cluster) })
        }
        Target::Sentinel(s) => {
            let opening = async move { s.open().await.map(Connection::sentinel) };
            return match tokio::time::timeout(timeout, opening).await {
                Ok(Ok(con)) => Ok(con),
                Ok(Err(e)) => Err(NodeAnswer::Unreachable(Fault::caused_by(
                    format!("no master through the sentinels: {e}"),
                    e,
                ))),
                Err(_) => Err(NodeAnswer::Unreachable(
                    format!(
                        "no master through the sentinels within {} ms",
                        timeout.as_millis()
                    )
                    .into(),
                )),
            };
        }
    };
    match tokio::time::timeout(timeout, opening).await {
        Ok(Ok(con)) => Ok(con),
        Ok(Err(e)) => Err(reply::fault(e)),
        Err(_) => Err(NodeAnswer::Unreachable(
            format!("no connection within {} ms", timeout.as_millis()).into(),
        )),
    }
}
