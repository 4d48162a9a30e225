//! One lock node: a Redis master or a whole Redis Cluster, its shared,
//! auto-reconnecting connection and the lock operations on it, each bounded by
//! a timeout and reduced to a [`NodeAnswer`].

use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures_util::future::{join_all, BoxFuture, FutureExt, Shared};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::{
    Client, ClientTlsConfig, Cmd, ConnectionAddr, Pipeline, ProtocolVersion, PushInfo, PushKind,
    RedisError, RedisFuture, TlsCertificates, Value,
};

use crate::core::broken::{self, Broken};
use crate::core::config::TlsConfig;
use crate::core::error::{ErrorCode, LockError, NodeAnswer, Result};
use crate::core::scripts;
use crate::core::waiters::{Waiters, CHANNEL_PREFIX};

/// What a node connects to.
#[derive(Clone)]
enum Target {
    Single(Client, ConnectionManagerConfig),
    /// A Redis Cluster: one logical node whose commands route by their first key.
    Cluster(ClusterClient),
}

/// A node's shared connection: one master's, or a cluster's (which follows
/// MOVED/ASK redirections and refreshes its slot map after a failover).
#[derive(Clone)]
pub enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c) => c.req_packed_commands(cmd, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }
}

/// A lock node and its lazily opened, shared connection.
pub struct Node {
    /// `host:port` (or the socket path), or `cluster host:port,…` for a cluster's
    /// seeds: safe to print, never carries credentials.
    pub name: String,
    target: Target,
    connect_timeout: Duration,
    current: RwLock<Option<Connection>>,
    /// The connect in progress, shared by every caller waiting for it. It runs
    /// as its own task, so a caller that stops waiting does not cancel it.
    connecting: std::sync::Mutex<Option<Connecting>>,
    closed: std::sync::atomic::AtomicBool,
    /// A second connection, opened when a caller first waits for a key held
    /// here, that only subscribes to release notices (RESP3 push messages).
    notices: tokio::sync::Mutex<Notices>,
    /// Connections of their own for writes that `WAIT` for replicas: WAIT blocks
    /// the connection it runs on and counts the writes sent before it there.
    acked: [tokio::sync::Mutex<Option<ConnectionManager>>; ACKED_CONNECTIONS],
}

/// How many acquisitions or extensions may wait for replicas at once, per node.
const ACKED_CONNECTIONS: usize = 4;

enum Notices {
    Unused,
    Open(ConnectionManager),
    /// A cluster, or a server that cannot push (no RESP3 before Redis 6):
    /// its waiters retry on their timers alone.
    Unsupported,
}

/// What one node needs for a renewal inside a batch.
pub struct Renewal<'a> {
    pub keys: &'a [String],
    pub token: &'a str,
    pub ttl_ms: u64,
}

impl Node {
    /// Parses `url` (no I/O). A malformed URL or an unsupported scheme is an
    /// `ERR_INVALID_ARG_VALUE` that never echoes a password.
    pub fn open(
        url: &str,
        tls: Option<&TlsConfig>,
        connect_timeout: Duration,
        command_timeout: Duration,
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
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(Some(command_timeout))
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
    pub fn open_cluster(
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
            format!("cluster {}", names.join(",")),
            Target::Cluster(client),
            connect_timeout,
        ))
    }

    fn new(name: String, target: Target, connect_timeout: Duration) -> Node {
        Node {
            name,
            target,
            connect_timeout,
            current: RwLock::new(None),
            connecting: std::sync::Mutex::new(None),
            closed: std::sync::atomic::AtomicBool::new(false),
            notices: tokio::sync::Mutex::new(Notices::Unused),
            acked: Default::default(),
        }
    }

    /// A free connection for replica-acknowledged writes (opened on first use,
    /// within the connect timeout).
    async fn acked_slot(
        &self,
    ) -> Result<
        (
            tokio::sync::MutexGuard<'_, Option<ConnectionManager>>,
            Connection,
        ),
        NodeAnswer,
    > {
        let Target::Single(client, config) = &self.target else {
            return Err(NodeAnswer::ErrorReply(
                "waitReplicas needs a single master".into(),
            ));
        };
        let mut slot = match self.acked.iter().find_map(|m| m.try_lock().ok()) {
            Some(slot) => slot,
            None => self.acked[0].lock().await,
        };
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(NodeAnswer::Unreachable("the client is closed".into()));
        }
        if slot.is_none() {
            // WAIT may block for its whole timeout: the reply deadline is ours.
            let config = config.clone().set_response_timeout(None);
            match tokio::time::timeout(
                self.connect_timeout,
                client.get_connection_manager_with_config(config),
            )
            .await
            {
                Ok(Ok(con)) => *slot = Some(con),
                Ok(Err(e)) => return Err(fault(&e)),
                Err(_) => return Err(NodeAnswer::Timeout),
            }
        }
        let con = slot
            .clone()
            .map(Connection::Single)
            .ok_or(NodeAnswer::Timeout)?;
        Ok((slot, con))
    }

    /// The acquire script, then `WAIT replicas wait`, on a connection of their
    /// own. The third value is how many replicas acknowledged (`None` when the
    /// lock was not taken or WAIT failed).
    pub async fn acquire_acked(
        &self,
        keys: &[String],
        locked: usize,
        token: &str,
        ttl_ms: u64,
        timeout: Duration,
        (replicas, wait): (u32, Duration),
    ) -> (NodeAnswer, i64, Option<u32>) {
        let (_slot, mut con) = match self.acked_slot().await {
            Ok(got) => got,
            Err(answer) => return (answer, 0, None),
        };
        let (answer, fence) = self
            .acquire(&mut con, keys, locked, token, ttl_ms, timeout)
            .await;
        if answer != NodeAnswer::Ok {
            return (answer, fence, None);
        }
        let acked = wait_replicas(&mut con, replicas, wait, timeout).await;
        (answer, fence, acked)
    }

    /// [`Node::extend_batch`] for one lock, then `WAIT`, on a connection of their own.
    pub async fn extend_acked(
        &self,
        renewal: &Renewal<'_>,
        timeout: Duration,
        (replicas, wait): (u32, Duration),
    ) -> (NodeAnswer, Option<u32>) {
        let (_slot, mut con) = match self.acked_slot().await {
            Ok(got) => got,
            Err(answer) => return (answer, None),
        };
        let batch = std::slice::from_ref(renewal);
        let answer = self
            .extend_on(&mut con, batch, timeout)
            .await
            .pop()
            .unwrap_or(NodeAnswer::Timeout);
        if answer != NodeAnswer::Ok {
            return (answer, None);
        }
        let acked = wait_replicas(&mut con, replicas, wait, timeout).await;
        (answer, acked)
    }

    /// Subscribes to release notices for `channel`, opening the notice
    /// connection on first use; notices go to `waiters`. False when this node
    /// cannot deliver them (the caller then relies on its retry timer).
    pub async fn subscribe(
        &self,
        channel: &str,
        waiters: &Arc<Waiters>,
        timeout: Duration,
    ) -> bool {
        let Target::Single(client, config) = &self.target else {
            return false;
        };
        let mut notices = self.notices.lock().await;
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return false;
        }
        if matches!(*notices, Notices::Unused) {
            let info = client.get_connection_info().clone();
            let redis = info
                .redis_settings()
                .clone()
                .set_protocol(ProtocolVersion::RESP3);
            let Ok(resp3) = Client::open(info.set_redis_settings(redis)) else {
                *notices = Notices::Unsupported;
                return false;
            };
            let sink = Arc::downgrade(waiters);
            let config = config
                .clone()
                .set_automatic_resubscription()
                .set_push_sender(move |push: PushInfo| {
                    if push.kind == PushKind::Message {
                        if let (
                            Some(Value::BulkString(ch)),
                            Some(Value::BulkString(token)),
                            Some(w),
                        ) = (push.data.first(), push.data.get(1), sink.upgrade())
                        {
                            w.on_message(ch, token);
                        }
                    }
                    Ok::<(), redis::aio::SendError>(())
                });
            match tokio::time::timeout(timeout, resp3.get_connection_manager_with_config(config))
                .await
            {
                // close() ran meanwhile: drop the new connection at once.
                Ok(Ok(_)) if self.closed.load(std::sync::atomic::Ordering::Acquire) => {
                    return false
                }
                Ok(Ok(con)) => *notices = Notices::Open(con),
                // A server without HELLO 3 will not learn it on a retry.
                Ok(Err(e))
                    if e.kind()
                        == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError) =>
                {
                    *notices = Notices::Unsupported;
                    return false;
                }
                _ => return false,
            }
        }
        let Notices::Open(con) = &mut *notices else {
            return false;
        };
        matches!(
            tokio::time::timeout(timeout, con.subscribe(channel)).await,
            Ok(Ok(()))
        )
    }

    /// Ends the subscription to `channel` unless `still_wanted()` says a new
    /// waiter came meanwhile (checked under the same lock a subscribe takes).
    pub async fn unsubscribe(
        &self,
        channel: &str,
        still_wanted: impl Fn() -> bool,
        timeout: Duration,
    ) {
        let mut notices = self.notices.lock().await;
        if still_wanted() {
            return;
        }
        if let Notices::Open(con) = &mut *notices {
            let _ = tokio::time::timeout(timeout, con.unsubscribe(channel)).await;
        }
    }

    /// True for a Redis Cluster, where one pipeline cannot span hash slots.
    pub fn is_cluster(&self) -> bool {
        matches!(self.target, Target::Cluster(_))
    }

    fn cached(&self) -> Option<Connection> {
        self.current.read().ok().and_then(|c| c.clone())
    }

    /// The shared connection, opened on first use within the connect timeout.
    pub async fn connection(&self) -> Result<Connection, NodeAnswer> {
        if let Some(con) = self.cached() {
            return Ok(con);
        }
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(NodeAnswer::Unreachable("the client is closed".into()));
        }
        let pending = {
            let Ok(mut slot) = self.connecting.lock() else {
                return Err(NodeAnswer::Unreachable("connection state poisoned".into()));
            };
            match &*slot {
                Some(pending) => pending.clone(),
                None => {
                    let task = tokio::spawn(open(self.target.clone(), self.connect_timeout));
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
        if let Ok(mut slot) = self.connecting.lock() {
            if slot.as_ref().is_some_and(|p| p.ptr_eq(&pending)) {
                *slot = None; // done: the next caller reuses the connection or tries anew
            }
        }
        if let Ok(con) = &result {
            if let Ok(mut current) = self.current.write() {
                if current.is_none() && !self.closed.load(std::sync::atomic::Ordering::Acquire) {
                    *current = Some(con.clone());
                }
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
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        if let Ok(mut slot) = self.current.write() {
            *slot = None;
        }
        if let Ok(mut notices) = self.notices.try_lock() {
            *notices = Notices::Unsupported;
        }
        for slot in &self.acked {
            if let Ok(mut slot) = slot.try_lock() {
                *slot = None;
            }
        }
    }

    /// Runs the acquire script. `keys` holds the `locked` lock keys, then their
    /// fence counters (if fencing); on success the answer carries the first key's
    /// fence value (0 without fencing).
    pub async fn acquire(
        &self,
        con: &mut Connection,
        keys: &[String],
        locked: usize,
        token: &str,
        ttl_ms: u64,
        timeout: Duration,
    ) -> (NodeAnswer, i64) {
        let mut invocation = scripts::ACQUIRE.key(keys);
        invocation.arg(token).arg(ttl_ms).arg(locked);
        let call = invocation.invoke_async::<Vec<i64>>(con);
        match bounded(timeout, call).await {
            Ok(reply) => match reply.as_slice() {
                [1, fence, ..] => (NodeAnswer::Ok, *fence),
                [0, pttl, ..] => (
                    NodeAnswer::Held {
                        pttl_ms: u64::try_from(*pttl).ok(),
                    },
                    0,
                ),
                _ => (
                    NodeAnswer::ErrorReply(format!("unexpected acquire reply {reply:?}")),
                    0,
                ),
            },
            Err(answer) => (answer, 0),
        }
    }

    pub async fn release(&self, keys: &[String], token: &str, timeout: Duration) -> NodeAnswer {
        let mut con = match self.connection_within(timeout).await {
            Ok(con) => con,
            Err(answer) => return answer,
        };
        if broken::mode() == Broken::PlainDel {
            let mut del = redis::cmd("DEL");
            del.arg(keys);
            return match bounded(timeout, del.query_async::<i64>(&mut con)).await {
                Ok(_) => NodeAnswer::Ok,
                Err(answer) => answer,
            };
        }
        let mut invocation = scripts::RELEASE.key(keys);
        // A cluster would broadcast every notice to all its nodes, and its
        // waiters do not subscribe: no notices there.
        let notices = if self.is_cluster() {
            ""
        } else {
            CHANNEL_PREFIX
        };
        invocation.arg(token).arg(notices);
        let call = invocation.invoke_async::<i64>(&mut con);
        match bounded(timeout, call).await {
            Ok(n) if n == keys.len() as i64 => NodeAnswer::Ok,
            Ok(_) => NodeAnswer::NotHeld,
            Err(answer) => answer,
        }
    }

    /// Reads a lock key without changing it: its value, its PTTL and its fence counter.
    pub async fn inspect(
        &self,
        key: &str,
        fence_key: &str,
        timeout: Duration,
    ) -> Result<(Option<String>, i64, Option<i64>), NodeAnswer> {
        let mut con = self.connection_within(timeout).await?;
        let mut pipe = redis::pipe();
        pipe.get(key).pttl(key).get(fence_key);
        bounded(timeout, pipe.query_async(&mut con)).await
    }

    /// Deletes a key whoever holds it (operators only). `Ok` if it existed.
    pub async fn force_delete(&self, key: &str, timeout: Duration) -> NodeAnswer {
        let mut con = match self.connection_within(timeout).await {
            Ok(con) => con,
            Err(answer) => return answer,
        };
        let mut del = redis::cmd("DEL");
        del.arg(key);
        match bounded(timeout, del.query_async::<i64>(&mut con)).await {
            Ok(1) => NodeAnswer::Ok,
            Ok(_) => NodeAnswer::NotHeld,
            Err(answer) => answer,
        }
    }

    /// Renews many locks in one pipelined round trip; one answer per renewal.
    pub async fn extend_batch(&self, batch: &[Renewal<'_>], timeout: Duration) -> Vec<NodeAnswer> {
        match self.connection_within(timeout).await {
            Ok(mut con) => self.extend_on(&mut con, batch, timeout).await,
            Err(answer) => vec![answer; batch.len()],
        }
    }

    /// [`Node::extend_batch`] on a given connection.
    async fn extend_on(
        &self,
        con: &mut Connection,
        batch: &[Renewal<'_>],
        timeout: Duration,
    ) -> Vec<NodeAnswer> {
        let hash = scripts::EXTEND.get_hash();
        let answers = self.extend_pipeline(con, batch, hash, timeout).await;
        if !answers.iter().any(is_noscript) {
            return answers;
        }
        // The node lost its script cache (SCRIPT FLUSH or a restart): nothing ran
        // for those entries, so loading the script and sending them again is safe.
        if let Err(answer) = bounded(timeout, load_extend(con)).await {
            return vec![answer; batch.len()];
        }
        self.extend_pipeline(con, batch, hash, timeout).await
    }

    /// Renews one lock on its own (a cluster routes it by its first key), with
    /// the same NOSCRIPT recovery as [`Node::extend_batch`].
    pub async fn extend_one(&self, renewal: &Renewal<'_>, timeout: Duration) -> NodeAnswer {
        let mut con = match self.connection_within(timeout).await {
            Ok(con) => con,
            Err(answer) => return answer,
        };
        let hash = scripts::EXTEND.get_hash();
        let cmd = extend_cmd(renewal, hash);
        let mut answer = match bounded(timeout, cmd.query_async::<Value>(&mut con)).await {
            Ok(reply) => extend_answer(Ok(reply)),
            Err(answer) => answer,
        };
        if is_noscript(&answer) {
            // SCRIPT LOAD reaches every node of a cluster.
            if let Err(answer) = bounded(timeout, load_extend(&mut con)).await {
                return answer;
            }
            answer = match bounded(timeout, cmd.query_async::<Value>(&mut con)).await {
                Ok(reply) => extend_answer(Ok(reply)),
                Err(answer) => answer,
            };
        }
        answer
    }

    async fn extend_pipeline(
        &self,
        con: &mut Connection,
        batch: &[Renewal<'_>],
        hash: &str,
        timeout: Duration,
    ) -> Vec<NodeAnswer> {
        if let Connection::Cluster(cluster) = con {
            // A pipeline cannot span hash slots: send the renewals side by side,
            // each routed by its first key, over the same multiplexed connections.
            let cluster = &*cluster;
            return join_all(batch.iter().map(|r| async move {
                let mut con = cluster.clone();
                match bounded(timeout, extend_cmd(r, hash).query_async::<Value>(&mut con)).await {
                    Ok(reply) => extend_answer(Ok(reply)),
                    Err(answer) => answer,
                }
            }))
            .await;
        }
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for r in batch {
            pipe.add_command(extend_cmd(r, hash));
        }
        match bounded(
            timeout,
            pipe.query_async::<Vec<redis::RedisResult<Value>>>(con),
        )
        .await
        {
            Ok(replies) if replies.len() == batch.len() => {
                replies.into_iter().map(extend_answer).collect()
            }
            Ok(replies) => vec![
                NodeAnswer::ErrorReply(format!(
                    "{} replies for {} commands",
                    replies.len(),
                    batch.len()
                ));
                batch.len()
            ],
            Err(answer) => vec![answer; batch.len()],
        }
    }
}

/// `WAIT replicas wait_ms`: how many replicas acknowledged the writes this
/// connection sent before it (`None` if the call failed).
async fn wait_replicas(
    con: &mut Connection,
    replicas: u32,
    wait: Duration,
    timeout: Duration,
) -> Option<u32> {
    let mut cmd = redis::cmd("WAIT");
    cmd.arg(replicas).arg(wait.as_millis().max(1) as u64);
    bounded(wait + timeout, cmd.query_async::<i64>(con))
        .await
        .ok()
        .map(|n| u32::try_from(n).unwrap_or(0))
}

async fn load_extend(con: &mut Connection) -> redis::RedisResult<String> {
    let mut load = redis::cmd("SCRIPT");
    load.arg("LOAD").arg(include_str!("../scripts/extend.lua"));
    load.query_async::<String>(con).await
}

/// One renewal's EVALSHA of the extend script.
fn extend_cmd(r: &Renewal<'_>, hash: &str) -> Cmd {
    let mut cmd = if broken::mode() == Broken::ExtendRecreates {
        let mut c = redis::cmd("EVAL");
        c.arg(RECREATE);
        c
    } else {
        let mut c = redis::cmd("EVALSHA");
        c.arg(hash);
        c
    };
    cmd.arg(r.keys.len()).arg(r.keys).arg(r.token).arg(r.ttl_ms);
    cmd
}

fn extend_answer(reply: redis::RedisResult<Value>) -> NodeAnswer {
    match reply {
        Ok(Value::Int(1)) => NodeAnswer::Ok,
        Ok(Value::Int(_)) => NodeAnswer::NotHeld,
        Ok(other) => NodeAnswer::ErrorReply(format!("unexpected reply {other:?}")),
        Err(e) => fault(&e),
    }
}

/// The broken extend of `Broken::ExtendRecreates`: sets the keys whatever they hold.
const RECREATE: &str =
    "for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end return 1";

/// Parses one node URL (no I/O), with TLS material for `rediss://`. A malformed
/// URL is an `ERR_INVALID_ARG_VALUE` that never echoes a password.
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

type Connecting = Shared<BoxFuture<'static, Result<Connection, NodeAnswer>>>;

/// Opens a node's connection within `timeout`.
async fn open(target: Target, timeout: Duration) -> Result<Connection, NodeAnswer> {
    let opening: BoxFuture<'_, redis::RedisResult<Connection>> = match &target {
        Target::Single(client, config) => Box::pin(async move {
            ConnectionManager::new_with_config(client.clone(), config.clone())
                .await
                .map(Connection::Single)
        }),
        Target::Cluster(client) => {
            Box::pin(async move { client.get_async_connection().await.map(Connection::Cluster) })
        }
    };
    match tokio::time::timeout(timeout, opening).await {
        Ok(Ok(con)) => Ok(con),
        Ok(Err(e)) => Err(fault(&e)),
        Err(_) => Err(NodeAnswer::Unreachable(format!(
            "no connection within {} ms",
            timeout.as_millis()
        ))),
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

fn is_noscript(answer: &NodeAnswer) -> bool {
    matches!(answer, NodeAnswer::ErrorReply(m) if m.starts_with("NOSCRIPT"))
}

/// Runs one call under a timeout, turning every failure into a [`NodeAnswer`].
async fn bounded<T>(
    timeout: Duration,
    call: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, NodeAnswer> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(fault(&e)),
        Err(_) => Err(NodeAnswer::Timeout),
    }
}

/// Sorts a redis error into a timeout, an unreachable node or an error reply.
pub fn fault(e: &RedisError) -> NodeAnswer {
    if e.is_timeout() {
        NodeAnswer::Timeout
    } else if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() {
        NodeAnswer::Unreachable(e.to_string())
    } else {
        match e.code() {
            Some(code) => {
                NodeAnswer::ErrorReply(format!("{code} {}", e.detail().unwrap_or_default()))
            }
            None => NodeAnswer::ErrorReply(e.to_string()),
        }
    }
}

/// The error a single node's fault becomes when there is no quorum to speak of.
pub fn single_node_error(node: &str, answer: &NodeAnswer) -> LockError {
    let code = match answer {
        NodeAnswer::ErrorReply(_) => ErrorCode::Redis,
        _ => ErrorCode::Connection,
    };
    LockError::new(code, format!("Redis at {node}: {answer}"))
}
