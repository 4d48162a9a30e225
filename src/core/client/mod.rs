//! The public client: it checks input, builds the nodes, prepares requests
//! (a lock's keys are checked, and its place in call order taken, by
//! `engine/acquire.rs`'s [`Request`], which the JS thread's own acquire of
//! one key makes itself) and closes; `kinds.rs` prepares the requests of semaphores, read-write
//! and fair locks, `stored.rs` looks at or clears stored lock keys. Taking a
//! lock is `drivers/` (this client's own `acquire` runs tokio's), keeping
//! it `engine/renew.rs`. Every operation goes to all nodes in
//! parallel and needs a quorum (floor(N/2) + 1; 1 of 1 for a single node),
//! decided in `quorum/`.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures_util::future::join_all;
use tokio_util::sync::CancellationToken;

use crate::core::config::{AcquireOptions, AcquireSpec, ClientConfig};
use crate::core::engine::acquire::{checked_names, Request};
use crate::core::engine::adopt;
use crate::core::engine::inner::{EventHook, Inner};
use crate::core::engine::lock::Lock;
use crate::core::engine::stats::StatsSnapshot;
use crate::core::error::{ErrorCode, LockError, Result};
use crate::core::transport::tokio::Node;

mod kinds;
mod stored;

pub use stored::{Inspection, TokenRelease};

/// A lock client over one or more independent Redis masters. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

/// A [`Client`] that may be gone.
#[derive(Clone)]
pub struct WeakClient(std::sync::Weak<Inner>);

impl WeakClient {
    pub fn upgrade(&self) -> Option<Client> {
        self.0.upgrade().map(|inner| Client { inner })
    }
}

/// What [`Client::inspect`] found.
impl Client {
    /// Checks the configuration and parses every node URL; opens no connection.
    pub fn new(cfg: ClientConfig, hook: Option<EventHook>) -> Result<Client> {
        cfg.validate()?;
        let mut nodes: Vec<Node> = Vec::with_capacity(cfg.nodes.len());
        if let Some(sentinel) = &cfg.sentinel {
            nodes.push(Node::for_sentinel(sentinel, cfg.connect_timeout)?);
        }
        for spec in &cfg.nodes {
            let node = Node::for_spec(spec, &cfg)?;
            let seen: Vec<&str> = nodes.iter().flat_map(Node::addresses).collect();
            if let Some(twice) = node.addresses().into_iter().find(|a| seen.contains(a)) {
                return Err(LockError::invalid_value(
                    "nodes",
                    &format!("lists {twice} twice; Redlock needs independent nodes"),
                ));
            }
            nodes.push(node);
        }
        Ok(Client {
            inner: Inner::new(cfg, nodes, hook),
        })
    }

    /// A handle that does not keep the client alive.
    pub fn downgrade(&self) -> WeakClient {
        WeakClient(Arc::downgrade(&self.inner))
    }

    pub fn config(&self) -> &ClientConfig {
        &self.inner.cfg
    }

    pub fn node_names(&self) -> Vec<String> {
        self.inner.node_names.to_vec()
    }

    /// True once `close()` was called (it may still be waiting to end the held locks).
    pub fn is_closed(&self) -> bool {
        self.inner.closing.begun()
    }

    pub fn stats(&self) -> StatsSnapshot {
        self.inner.stats.snapshot()
    }

    /// Each node's name and health, in order.
    pub fn health(&self) -> Vec<(&str, crate::core::engine::health::NodeStatus)> {
        let inner = &self.inner;
        (0..inner.nodes.len())
            .map(|i| (&*inner.nodes[i].name, inner.health.status(i)))
            .collect()
    }

    /// Resolves options against the client's defaults, without I/O.
    pub fn resolve(&self, opts: &AcquireOptions) -> Result<AcquireSpec> {
        self.inner.cfg.spec(opts)
    }

    /// Takes the lock on `keys` (all of them, as one lock), waiting and retrying
    /// on contention as `opts` allows. `cancel` aborts the wait.
    pub async fn acquire(
        &self,
        keys: Vec<String>,
        opts: &AcquireOptions,
        cancel: CancellationToken,
    ) -> Result<Lock> {
        let request = self.prepare_lock(keys, opts)?;
        self.acquire_prepared(request, cancel).await
    }

    /// [`Client::prepare`] for a plain lock, taking the caller's place among
    /// this client's callers of the key: call it when the caller calls, so
    /// that they are served in call order.
    pub fn prepare_lock(&self, keys: Vec<String>, opts: &AcquireOptions) -> Result<Request> {
        Ok(self.prepare(keys, opts)?.in_line(&self.inner))
    }

    /// Checks keys and options without I/O, so bad input fails before anything is sent.
    pub fn prepare(&self, keys: Vec<String>, opts: &AcquireOptions) -> Result<Request> {
        let names = checked_names(&self.inner, keys.into())?;
        Ok(Request::new(names, self.resolve(opts)?))
    }

    /// [`Client::acquire`] for a request [`Client::prepare`] has checked.
    pub async fn acquire_prepared(
        &self,
        request: Request,
        cancel: CancellationToken,
    ) -> Result<Lock> {
        crate::core::drivers::tokio::acquire(&self.inner, request, cancel).await
    }

    /// One attempt: the lock, or `None` when another owner holds it.
    pub async fn try_acquire(
        &self,
        keys: Vec<String>,
        opts: &AcquireOptions,
    ) -> Result<Option<Lock>> {
        let mut once = opts.clone();
        once.retry_count = Some(Some(0));
        match self.acquire(keys, &once, CancellationToken::new()).await {
            Ok(lock) => Ok(Some(lock)),
            Err(e) if e.code == ErrorCode::Taken => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Continues the lock on `keys` whose value is `token` (e.g. handed over by
    /// another process): one token-checked extend to the resolved ttl on every
    /// node, then the watchdog renews it like an acquired lock. Never creates a
    /// key; `ERR_LOCK_LOST` when the keys are gone or hold another token.
    pub async fn adopt(
        &self,
        keys: Vec<String>,
        token: String,
        opts: &AcquireOptions,
    ) -> Result<Lock> {
        let request = self.prepare_adopt(keys, &token, opts)?;
        adopt::adopt(&self.inner, request, token).await
    }

    /// Checks an adoption's keys, token and options without I/O.
    pub fn prepare_adopt(
        &self,
        keys: Vec<String>,
        token: &str,
        opts: &AcquireOptions,
    ) -> Result<Request> {
        adopt::check_token(token)?;
        self.prepare(keys, opts)
    }

    /// [`Client::adopt`] for a request [`Client::prepare_adopt`] has checked.
    pub async fn adopt_prepared(&self, request: Request, token: String) -> Result<Lock> {
        adopt::adopt(&self.inner, request, token).await
    }

    /// Releases the lock on `keys` wherever its keys hold `token`, without
    /// adopting it (a lock taken by another process, its token handed over):
    /// one token-checked delete on every node; released when a quorum held it.
    /// Each node's answer: `Ok` where it held the token, `NotHeld` where the
    /// keys were gone or another owner's.
    pub async fn release_token(&self, keys: Vec<String>, token: &str) -> Result<TokenRelease> {
        adopt::check_token(token)?;
        let request = self.prepare(keys, &AcquireOptions::default())?;
        stored::release_token(&self.inner, &request.names, token).await
    }

    /// How many callers of this client wait in line for the lock `name`.
    pub fn waiting(&self, name: &str) -> usize {
        stored::waiting(&self.inner, name)
    }

    /// Counts the permits held in the semaphore `name` by unexpired holders.
    pub async fn count_permits(&self, name: &str) -> Result<crate::core::engine::semaphore::Count> {
        stored::count_permits(&self.inner, name).await
    }

    /// Looks at a lock key on every node without touching it.
    pub async fn inspect(&self, name: &str) -> Result<Inspection> {
        stored::inspect(&self.inner, name).await
    }

    /// Deletes the lock key on every node, whoever holds it. Unsafe: the holder
    /// is not told and may still be working. Returns on how many nodes it existed.
    pub async fn force_release(&self, name: &str) -> Result<usize> {
        stored::force_release(&self.inner, name).await
    }

    /// Completes once the nodes a Redlock operation did not wait for (its
    /// outcome was decided by a quorum) have answered or timed out, and every
    /// other background cleanup (undone attempts, releases of lost locks) ended.
    pub async fn settled(&self) {
        self.inner.settled().await
    }

    /// Closes at once, without a round trip: the watchdog stops, every held
    /// lock ends (its keys expire by TTL) and the connections close. For
    /// when nothing may be awaited any more (the runtime is going away).
    pub fn abandon(&self) {
        let inner = &self.inner;
        if inner.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        inner.begin_close();
        inner.watchdog.stop();
        let held = inner
            .watchdog
            .drain()
            .into_iter()
            .filter(|s| s.end_released())
            .count();
        inner.stats.held.fetch_sub(held as u64, Ordering::Relaxed);
        for node in &inner.nodes {
            node.disconnect();
        }
    }

    /// The first step of `close()`: from now on no new acquisition or
    /// adoption is taken and those waiting end with `ERR_LOCK_CLOSED`; held
    /// locks stay held (and may be extended) until [`Client::close`].
    pub fn begin_close(&self) {
        self.inner.begin_close();
    }

    /// [`Client::close_telling`] with nobody to tell.
    pub async fn close(&self) {
        self.close_telling(|| {}).await
    }

    /// Ends the client. At once ([`Client::begin_close`] included): every
    /// lock still held ends with the `ERR_LOCK_CLOSED` its holder is told
    /// ([`crate::core::engine::lock::LockState::ending`]), the watchdog stops, and `ended` runs (the
    /// holders are told) before anything is sent. The future then releases
    /// those locks, waits for the cleanup releases still running in the
    /// background and closes the connections. A later call does nothing.
    pub fn close_telling(&self, ended: impl FnOnce()) -> impl Future<Output = ()> + Send + 'static {
        let inner = self.inner.clone();
        let first = !inner.closed.swap(true, Ordering::AcqRel);
        let mut held = Vec::new();
        if first {
            inner.begin_close();
            inner.watchdog.stop();
            held = inner
                .watchdog
                .drain()
                .into_iter()
                .filter(|s| s.end_closed())
                .collect();
            inner
                .stats
                .held
                .fetch_sub(held.len() as u64, Ordering::Relaxed);
            ended();
        }
        async move {
            if !first {
                return;
            }
            join_all(
                held.iter()
                    .map(|s| crate::core::engine::at_quorum::release_state(&inner, s)),
            )
            .await;
            // Cleanup releases still running (undone attempts, lost locks) go first.
            inner.settled().await;
            for node in &inner.nodes {
                node.disconnect();
            }
            // What the client's locks and queues took is free now: give it
            // back (a client that held many locks, even if released before,
            // leaves as much freed memory behind).
            crate::core::base::give_back();
        }
    }
}
