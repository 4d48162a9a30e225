//! The lock algorithm, one code path for one node or many: every operation goes
//! to all nodes in parallel and needs a quorum (floor(N/2) + 1; 1 of 1 for a
//! single node), with validity = ttl − elapsed − drift measured from before the
//! first request was sent.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use rand::Rng;
use tokio_util::sync::CancellationToken;

use crate::core::broken::{self, Broken};
use crate::core::config::{lock_keys, AcquireOptions, AcquireSpec, ClientConfig};
use crate::core::error::{ErrorCode, LockError, NodeAnswer, NodeReport, Result};
use crate::core::lock::{later, ms_of, LockState, NewLock, Status};
use crate::core::node::{single_node_error, Node, Renewal};
use crate::core::slot;
use crate::core::stats::{Stats, StatsSnapshot};
use crate::core::waiters::{self, Slot, Waiters};
use crate::core::watchdog::Watchdog;

/// What the client reports as it happens, e.g. to raise JS events.
#[non_exhaustive]
pub enum Event<'a> {
    /// A held lock was lost; `id` is [`Lock::id`].
    Lost { id: u64, error: &'a LockError },
    /// A node failed to answer (the operation may still have succeeded on a quorum).
    NodeError {
        node: &'a str,
        answer: &'a NodeAnswer,
    },
    /// A renewal batch renewed `count` locks.
    Renewed { count: usize },
}

pub type EventHook = Arc<dyn Fn(Event<'_>) + Send + Sync>;

pub struct Inner {
    pub cfg: ClientConfig,
    nodes: Vec<Node>,
    closed: AtomicBool,
    next_id: AtomicU64,
    pub stats: Stats,
    pub watchdog: Watchdog,
    hook: Option<EventHook>,
    /// Callers waiting for a held key, woken by its release notice.
    waiters: Arc<Waiters>,
}

/// A caller's place in the queue for a key; leaving it (on drop) ends the
/// key's subscription once nobody else waits for it.
struct Queued {
    inner: Arc<Inner>,
    key: String,
    slot: Arc<Slot>,
}

impl Drop for Queued {
    fn drop(&mut self) {
        if !self.inner.waiters.leave(&self.key, &self.slot) {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let inner = self.inner.clone();
            let key = std::mem::take(&mut self.key);
            runtime.spawn(async move { inner.unsubscribe(&key).await });
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.watchdog.stop();
    }
}

/// A lock client over one or more independent Redis masters. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// What [`Client::inspect`] found.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// A quorum of nodes holds the key with one value.
    pub held: bool,
    /// The shortest remaining TTL of that value, in ms.
    pub remaining_ms: Option<u64>,
    /// The holder's token, masked (its first 8 characters).
    pub holder: Option<String>,
    /// The highest fence counter seen (fencing clients only).
    pub fence: Option<i64>,
    pub nodes: Vec<NodeReport>,
}

fn mask(token: &str) -> String {
    let shown: String = token.chars().take(8).collect();
    format!("{shown}…")
}

/// A checked acquisition, ready to send.
pub struct Request {
    names: Vec<String>,
    spec: AcquireSpec,
}

/// How many nodes said what.
#[derive(Default)]
struct Tally {
    ok: usize,
    held: usize,
    not_held: usize,
    longest_pttl: Option<u64>,
}

fn tally(answers: &[NodeAnswer]) -> Tally {
    let mut t = Tally::default();
    for a in answers {
        match a {
            NodeAnswer::Ok => t.ok += 1,
            NodeAnswer::Held { pttl_ms } => {
                t.held += 1;
                t.longest_pttl = t.longest_pttl.max(*pttl_ms);
            }
            NodeAnswer::NotHeld => t.not_held += 1,
            _ => {}
        }
    }
    t
}

impl Client {
    /// Checks the configuration and parses every node URL; opens no connection.
    pub fn new(cfg: ClientConfig, hook: Option<EventHook>) -> Result<Client> {
        cfg.validate()?;
        let mut nodes: Vec<Node> = Vec::with_capacity(cfg.nodes.len());
        if cfg.cluster {
            nodes.push(Node::open_cluster(
                &cfg.nodes,
                cfg.tls.as_ref(),
                cfg.connect_timeout,
                cfg.command_timeout,
            )?);
        }
        for url in cfg.nodes.iter().filter(|_| !cfg.cluster) {
            let node = Node::open(
                url,
                cfg.tls.as_ref(),
                cfg.connect_timeout,
                cfg.command_timeout,
            )?;
            if nodes.iter().any(|n| n.name == node.name) {
                return Err(LockError::invalid_value(
                    "nodes",
                    &format!("lists {} twice; Redlock needs independent nodes", node.name),
                ));
            }
            nodes.push(node);
        }
        Ok(Client {
            inner: Arc::new(Inner {
                cfg,
                nodes,
                closed: AtomicBool::new(false),
                next_id: AtomicU64::new(1),
                stats: Stats::default(),
                watchdog: Watchdog::default(),
                hook,
                waiters: Arc::default(),
            }),
        })
    }

    pub fn config(&self) -> &ClientConfig {
        &self.inner.cfg
    }

    pub fn node_names(&self) -> Vec<String> {
        self.inner.nodes.iter().map(|n| n.name.clone()).collect()
    }

    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    pub fn stats(&self) -> StatsSnapshot {
        self.inner.stats.snapshot()
    }

    /// Resolves options against the client's defaults, without I/O.
    pub fn resolve(&self, opts: &AcquireOptions) -> Result<AcquireSpec> {
        let spec = opts.or(&self.inner.cfg.defaults).resolve()?;
        self.inner.cfg.check_spec(&spec)?;
        Ok(spec)
    }

    /// Takes the lock on `keys` (all of them, as one lock), waiting and retrying
    /// on contention as `opts` allows. `cancel` aborts the wait.
    pub async fn acquire(
        &self,
        keys: Vec<String>,
        opts: &AcquireOptions,
        cancel: CancellationToken,
    ) -> Result<Lock> {
        let request = self.prepare(keys, opts)?;
        self.acquire_prepared(request, cancel).await
    }

    /// Checks keys and options without I/O, so bad input fails before anything is sent.
    pub fn prepare(&self, keys: Vec<String>, opts: &AcquireOptions) -> Result<Request> {
        if self.is_closed() {
            return Err(LockError::closed());
        }
        let names = lock_keys(keys)?;
        let cfg = &self.inner.cfg;
        if cfg.cluster {
            // One script must reach every key, so they must live in one hash slot.
            let keys = self.inner.prefixed(&names);
            let fences: Vec<String> = if cfg.fencing {
                keys.iter().map(|k| fence_key(k)).collect()
            } else {
                Vec::new()
            };
            slot::check_one_slot(&names, &keys, &fences)?;
        }
        Ok(Request {
            names,
            spec: self.resolve(opts)?,
        })
    }

    /// [`Client::acquire`] for a request [`Client::prepare`] has checked.
    pub async fn acquire_prepared(
        &self,
        request: Request,
        cancel: CancellationToken,
    ) -> Result<Lock> {
        self.inner
            .acquire(request.names, request.spec, cancel)
            .await
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

    /// Looks at a lock key on every node without touching it.
    pub async fn inspect(&self, name: &str) -> Result<Inspection> {
        let inner = &self.inner;
        inner.ensure_open()?;
        let key = lock_keys(vec![name.to_string()])?.remove(0);
        let key = format!("{}{}", inner.cfg.key_prefix, key);
        let fence = fence_key(&key);
        let timeout = inner.cfg.command_timeout;
        let replies = join_all(inner.nodes.iter().map(|n| n.inspect(&key, &fence, timeout))).await;
        let mut answers = Vec::with_capacity(replies.len());
        let mut values: Vec<(String, i64)> = Vec::new();
        let mut fences = Vec::new();
        for reply in replies {
            match reply {
                Ok((value, pttl, f)) => {
                    if let Some(v) = value {
                        values.push((v, pttl));
                    }
                    fences.extend(f);
                    answers.push(NodeAnswer::Ok);
                }
                Err(answer) => answers.push(answer),
            }
        }
        if answers.iter().filter(|a| **a == NodeAnswer::Ok).count() < inner.quorum() {
            let err = if inner.nodes.len() == 1 {
                single_node_error(&inner.nodes[0].name, &answers[0])
            } else {
                LockError::new(ErrorCode::Quorum, "too few nodes answered the inspection")
            };
            return Err(err.with_key(name).with_nodes(inner.reports(&answers)));
        }
        // The value a quorum agrees on is the holder; its shortest PTTL bounds the lease.
        let mut best: Option<(&str, usize, i64)> = None;
        for (v, _) in &values {
            let same: Vec<i64> = values
                .iter()
                .filter(|(w, _)| w == v)
                .map(|(_, p)| *p)
                .collect();
            let shortest = same.iter().copied().min().unwrap_or(-2);
            if best.is_none_or(|(_, c, _)| same.len() > c) {
                best = Some((v, same.len(), shortest));
            }
        }
        let held = best.filter(|(_, count, _)| *count >= inner.quorum());
        Ok(Inspection {
            held: held.is_some(),
            remaining_ms: held.and_then(|(_, _, pttl)| u64::try_from(pttl).ok()),
            holder: held.map(|(v, _, _)| mask(v)),
            fence: fences.into_iter().max(),
            nodes: inner.reports(&answers),
        })
    }

    /// Deletes the lock key on every node, whoever holds it. Unsafe: the holder
    /// is not told and may still be working. Returns on how many nodes it existed.
    pub async fn force_release(&self, name: &str) -> Result<usize> {
        let inner = &self.inner;
        inner.ensure_open()?;
        let key = lock_keys(vec![name.to_string()])?.remove(0);
        let key = format!("{}{}", inner.cfg.key_prefix, key);
        let timeout = inner.cfg.command_timeout;
        let answers = join_all(inner.nodes.iter().map(|n| n.force_delete(&key, timeout))).await;
        // Deleted on some nodes but unknown on a majority: say so rather than
        // report a count that cannot tell "absent" from "unreachable".
        let answered = answers.iter().filter(|a| !a.is_fault()).count();
        if answered < inner.quorum() {
            let err = if inner.nodes.len() == 1 {
                single_node_error(&inner.nodes[0].name, &answers[0])
            } else {
                LockError::new(
                    ErrorCode::Quorum,
                    format!(
                        "the forced release of \"{name}\" reached {answered} of {} nodes, {} needed",
                        inner.nodes.len(),
                        inner.quorum()
                    ),
                )
            };
            return Err(err.with_key(name).with_nodes(inner.reports(&answers)));
        }
        Ok(answers.iter().filter(|a| **a == NodeAnswer::Ok).count())
    }

    /// Stops every watchdog, releases every held lock, then closes connections.
    /// Later calls fail with `ERR_LOCK_CLOSED`.
    pub async fn close(&self) {
        let inner = &self.inner;
        if inner.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        inner.watchdog.stop();
        let held: Vec<_> = inner
            .watchdog
            .drain()
            .into_iter()
            .filter(|s| s.end_released())
            .collect();
        inner
            .stats
            .held
            .fetch_sub(held.len() as u64, Ordering::Relaxed);
        join_all(held.iter().map(|s| inner.release_state(s))).await;
        for node in &inner.nodes {
            node.disconnect();
        }
    }
}

impl Inner {
    fn emit(&self, event: Event<'_>) {
        if let Some(hook) = &self.hook {
            hook(event);
        }
    }

    fn report_faults(&self, answers: &[NodeAnswer]) {
        for (node, answer) in self.nodes.iter().zip(answers) {
            if answer.is_fault() {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                self.emit(Event::NodeError {
                    node: &node.name,
                    answer,
                });
            }
        }
    }

    fn reports(&self, answers: &[NodeAnswer]) -> Vec<NodeReport> {
        self.nodes
            .iter()
            .zip(answers)
            .map(|(n, a)| NodeReport {
                node: n.name.clone(),
                answer: a.clone(),
            })
            .collect()
    }

    fn quorum(&self) -> usize {
        self.cfg.quorum()
    }

    fn ensure_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(LockError::closed())
        } else {
            Ok(())
        }
    }

    fn prefixed(&self, names: &[String]) -> Vec<String> {
        names
            .iter()
            .map(|n| format!("{}{}", self.cfg.key_prefix, n))
            .collect()
    }

    /// One parallel attempt on every node: the answers, the highest fence value
    /// handed out, and when the attempt started. `script_keys` holds the `locked`
    /// lock keys followed by their fence counters.
    async fn attempt(
        &self,
        script_keys: &[String],
        locked: usize,
        token: &str,
        ttl: Duration,
        acked: Option<(u32, Duration)>,
    ) -> (Vec<NodeAnswer>, i64, Instant, Option<u32>) {
        if let (Some(acked), [node]) = (acked, self.nodes.as_slice()) {
            // One master with replicas: the write and its WAIT on a connection of their own.
            let timeout = self.cfg.node_timeout_for(ttl);
            let started = Instant::now();
            let (answer, fence, replicas) = node
                .acquire_acked(script_keys, locked, token, ms_of(ttl), timeout, acked)
                .await;
            return (vec![answer], fence, started, replicas);
        }
        // Connect first (instant once connected), so that the validity clock,
        // which starts before the first SET is sent, does not pay for a handshake.
        // With several nodes one that cannot connect must not hold up the others:
        // it gets the node timeout (its connect goes on in the background).
        let timeout = self.cfg.node_timeout_for(ttl);
        let cons = join_all(self.nodes.iter().map(|n| async move {
            if self.nodes.len() > 1 {
                n.connection_within(timeout).await
            } else {
                n.connection().await
            }
        }))
        .await;
        let ttl_ms = ms_of(ttl);
        let started = Instant::now();
        let replies = join_all(self.nodes.iter().zip(cons).map(|(node, con)| async move {
            match con {
                Ok(mut con) => {
                    node.acquire(&mut con, script_keys, locked, token, ttl_ms, timeout)
                        .await
                }
                Err(answer) => (answer, 0),
            }
        }))
        .await;
        let fence = replies.iter().map(|(_, f)| *f).max().unwrap_or(0);
        let answers = replies.into_iter().map(|(a, _)| a).collect();
        (answers, fence, started, None)
    }

    /// Token-checked release on every node that may hold our token (all but those
    /// that answered "held by another", whose script provably wrote nothing).
    /// Waits no longer than the attempt itself could: a release queued behind a
    /// stalled node's SET still runs after it, in order, on the same connection.
    async fn undo(&self, keys: &[String], token: &str, answers: &[NodeAnswer], timeout: Duration) {
        join_all(
            self.nodes
                .iter()
                .zip(answers)
                .filter(|(_, a)| !matches!(a, NodeAnswer::Held { .. }))
                .map(|(n, _)| n.release(keys, token, timeout)),
        )
        .await;
    }

    async fn acquire(
        self: &Arc<Self>,
        names: Vec<String>,
        spec: AcquireSpec,
        cancel: CancellationToken,
    ) -> Result<Lock> {
        self.ensure_open()?;
        let keys = self.prefixed(&names);
        let mut script_keys = keys.clone();
        if self.cfg.fencing {
            script_keys.extend(keys.iter().map(|k| fence_key(k)));
        }
        let key_label = names.join(", ");
        let began = Instant::now();
        let wait_until = began + spec.wait_timeout;
        let drift = self.cfg.drift_for(spec.ttl);
        let n = self.nodes.len();
        let mut token = uuid::Uuid::new_v4().to_string();
        let mut attempts: u32 = 0;
        // Waiting for one key on plain masters: queue up for its release notices.
        let notices = keys.len() == 1 && !self.cfg.cluster;
        let mut queued: Option<Queued> = None;
        loop {
            if cancel.is_cancelled() {
                return Err(aborted(&key_label, attempts));
            }
            attempts += 1;
            if attempts > 1 && n > 1 {
                // Redlock: a fresh value per attempt. One node keeps its token, so an
                // earlier attempt that landed without a reply still counts as ours.
                token = uuid::Uuid::new_v4().to_string();
            }
            let (answers, fence, mut started, replicas) = self
                .attempt(
                    &script_keys,
                    keys.len(),
                    &token,
                    spec.ttl,
                    spec.wait_replicas,
                )
                .await;
            if broken::mode() == Broken::LateClock {
                started = Instant::now();
            }
            self.report_faults(&answers);
            let t = tally(&answers);
            let elapsed = started.elapsed();
            let validity = spec.ttl.saturating_sub(elapsed).saturating_sub(drift);
            let won = t.ok >= self.quorum() && validity >= spec.min_validity;
            if won && !cancel.is_cancelled() && self.ensure_open().is_ok() {
                let state = Arc::new(LockState::new(NewLock {
                    id: self.next_id.fetch_add(1, Ordering::Relaxed),
                    keys,
                    prefix_len: self.cfg.key_prefix.len(),
                    token,
                    attempts,
                    acquired_at: started,
                    deadline: later(started, spec.ttl.saturating_sub(drift)),
                    ttl: spec.ttl,
                    renew_every: spec.renew_interval,
                    hold_until: spec.max_hold.map(|h| later(started, h)),
                    auto_renew: spec.auto_renew,
                    fence: self.cfg.fencing.then_some(fence),
                    wait_replicas: spec.wait_replicas,
                }));
                state.set_replicas(replicas);
                self.stats.acquired.fetch_add(1, Ordering::Relaxed);
                self.stats.held.fetch_add(1, Ordering::Relaxed);
                self.watchdog.start(self);
                self.watchdog.watch(state.clone());
                let lock = Lock(Arc::new(LockHandle {
                    state,
                    inner: self.clone(),
                }));
                if self.ensure_open().is_err() {
                    // close() ran while this lock was being registered: give it back.
                    let _ = lock.release().await;
                    return Err(LockError::closed());
                }
                return Ok(lock);
            }
            self.undo(&keys, &token, &answers, self.cfg.node_timeout_for(spec.ttl))
                .await;
            if t.held > 0 {
                self.stats.contended.fetch_add(1, Ordering::Relaxed);
            }
            self.ensure_open()?;
            if cancel.is_cancelled() {
                return Err(aborted(&key_label, attempts));
            }
            let contended = t.held > 0;
            let failure = if contended {
                let mut e = LockError::new(
                    ErrorCode::Taken,
                    match t.longest_pttl {
                        Some(ms) => format!(
                            "lock \"{key_label}\" is held by another owner for another {ms} ms ({attempts} attempt(s))"
                        ),
                        None => format!(
                            "lock \"{key_label}\" is held by another owner ({attempts} attempt(s))"
                        ),
                    },
                );
                e.remaining_ms = t.longest_pttl;
                e
            } else if t.ok >= self.quorum() {
                LockError::new(
                    ErrorCode::Timeout,
                    format!(
                        "lock \"{key_label}\" was taken too late to be of use: {} ms of its {} ms ttl went by",
                        elapsed.as_millis(),
                        spec.ttl.as_millis()
                    ),
                )
            } else if n == 1 {
                single_node_error(&self.nodes[0].name, &answers[0])
            } else {
                let detail: Vec<String> = self
                    .reports(&answers)
                    .iter()
                    .map(|r| format!("{} {}", r.node, r.answer))
                    .collect();
                LockError::new(
                    ErrorCode::Quorum,
                    format!(
                        "lock \"{key_label}\": {} of {n} nodes agreed, {} needed ({})",
                        t.ok,
                        self.quorum(),
                        detail.join("; ")
                    ),
                )
            };
            let failure = failure
                .with_key(key_label.clone())
                .with_attempts(attempts)
                .with_nodes(self.reports(&answers));
            // Only contention is worth waiting out; unreachable nodes fail fast.
            let retries_left = spec.retry_count.is_none_or(|r| attempts <= r);
            if !contended || !retries_left {
                return Err(failure);
            }
            let now = Instant::now();
            if now >= wait_until {
                return Err(timed_out(failure, spec.wait_timeout));
            }
            let jitter_ms = spec.retry_jitter.as_millis() as u64;
            let jitter = Duration::from_millis(rand::rng().random_range(0..=jitter_ms));
            let mut pause = spec.retry_delay + jitter;
            if let Some(ms) = t.longest_pttl {
                // The holder's lease ends sooner than our pause: try right after it.
                pause = pause.min(Duration::from_millis(ms + 1));
            }
            let mut pause = pause.min(wait_until - now);
            if queued.is_none() && notices {
                // (A release before the subscription is in place goes unheard:
                // the retry timer covers it, as it covers a lost notice.)
                queued = Some(tokio::select! {
                    q = self.queue_up(&keys[0], pause) => q,
                    _ = cancel.cancelled() => return Err(aborted(&key_label, attempts)),
                });
                let spent = now.elapsed();
                if spent >= pause {
                    continue;
                }
                pause -= spent;
            }
            let woken = async {
                match &queued {
                    Some(q) => q.slot.woken().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = woken => {
                    self.stats.woken.fetch_add(1, Ordering::Relaxed);
                }
                _ = cancel.cancelled() => return Err(aborted(&key_label, attempts)),
            }
            if let Some(q) = &queued {
                // Trying now anyway: a notice that came meanwhile is spent.
                q.slot.consume();
            }
        }
    }

    /// Joins the queue for `key`; the first local waiter subscribes to its
    /// release notices on every node, waiting for that at most `timeout`.
    async fn queue_up(self: &Arc<Self>, key: &str, timeout: Duration) -> Queued {
        let joined = self.waiters.join(key);
        let queued = Queued {
            inner: self.clone(),
            key: key.to_string(),
            slot: joined.slot,
        };
        if joined.first {
            // The subscription runs on its own, so a node slow to answer delays
            // this waiter no longer than it would have slept anyway; a node that
            // cannot push leaves its waiters to their retry timers.
            let inner = self.clone();
            let channel = waiters::channel(key);
            let subscribing = tokio::spawn(async move {
                let limit = inner.cfg.connect_timeout.max(inner.cfg.command_timeout);
                join_all(
                    inner
                        .nodes
                        .iter()
                        .map(|n| n.subscribe(&channel, &inner.waiters, limit)),
                )
                .await
            });
            let _ = tokio::time::timeout(timeout, subscribing).await;
        }
        queued
    }

    /// Ends the subscription to `key`'s release notices unless a waiter came back.
    async fn unsubscribe(&self, key: &str) {
        let channel = waiters::channel(key);
        let timeout = self.cfg.command_timeout;
        join_all(
            self.nodes
                .iter()
                .map(|n| n.unsubscribe(&channel, || self.waiters.waiting(key), timeout)),
        )
        .await;
    }

    /// Sends a token-checked release everywhere; the lock has already ended locally.
    async fn release_state(&self, state: &LockState) -> Result<bool> {
        let timeout = self.cfg.command_timeout;
        let answers = join_all(
            self.nodes
                .iter()
                .map(|n| n.release(&state.keys, &state.token, timeout)),
        )
        .await;
        self.report_faults(&answers);
        let t = tally(&answers);
        if t.ok >= self.quorum() {
            return Ok(true);
        }
        if t.ok + t.not_held >= self.quorum() {
            return Ok(false);
        }
        let label = state.label();
        let err = if self.nodes.len() == 1 {
            single_node_error(&self.nodes[0].name, &answers[0])
        } else {
            LockError::new(
                ErrorCode::Quorum,
                format!("release of \"{label}\" reached too few nodes"),
            )
        };
        let message = format!("{}; the lock expires by its TTL", err.message);
        Err(LockError::new(err.code, message)
            .with_key(label)
            .with_nodes(self.reports(&answers)))
    }

    /// Ends a held lock as lost: notifies once, then releases it everywhere
    /// (token-checked, so only what is still ours goes).
    fn lose(self: &Arc<Self>, state: &Arc<LockState>, why: LockError) {
        if broken::mode() == Broken::SwallowFailures {
            // Broken on purpose: keep believing in the lock and keep renewing.
            state.set_deadline(later(Instant::now(), state.ttl()));
            self.watchdog.watch(state.clone());
            return;
        }
        if !state.end_lost(why.clone()) {
            return;
        }
        self.watchdog.unwatch(state.id);
        self.stats.lost.fetch_add(1, Ordering::Relaxed);
        self.stats.held.fetch_sub(1, Ordering::Relaxed);
        self.emit(Event::Lost {
            id: state.id,
            error: &why,
        });
        state.notify_ended();
        let inner = self.clone();
        let state = state.clone();
        tokio::spawn(async move {
            let _ = inner.release_state(&state).await;
        });
    }

    pub fn lose_expired(self: &Arc<Self>, state: &Arc<LockState>) {
        let label = state.label();
        let now = Instant::now();
        // Renewals stop short of maxHold, so the deadline lands one drift before it.
        let slack = self.cfg.drift_for(state.ttl()) + Duration::from_millis(5);
        let reason = if state
            .hold_until
            .is_some_and(|h| h.saturating_duration_since(now) <= slack)
        {
            "maxHold was reached, so the watchdog let it expire"
        } else if state.auto_renew {
            "its validity ran out before a renewal succeeded"
        } else {
            "its validity ran out (it is not renewed automatically)"
        };
        self.lose(state, lost(&label, reason));
    }

    /// Renews a batch of locks with one pipelined round trip per node. On a
    /// cluster, renewals go side by side and each lock settles on its own reply,
    /// so a master that stalls (e.g. during a failover) holds back only its locks.
    pub async fn renew_batch(self: Arc<Self>, batch: Vec<Arc<LockState>>) {
        let started = Instant::now();
        // A lock whose manual extend is in flight is left to it (the extend
        // reschedules the lock); if that extend fails, the quick retry renews it.
        let mut guards = Vec::with_capacity(batch.len());
        let batch: Vec<Arc<LockState>> = batch
            .into_iter()
            .filter(|s| match s.try_lease_guard() {
                Some(guard) => {
                    guards.push(guard);
                    true
                }
                None => {
                    self.watchdog.done(s.id, false, started);
                    false
                }
            })
            .collect();
        if batch.is_empty() {
            self.watchdog.nudge();
            return;
        }
        let ttls: Vec<Duration> = batch
            .iter()
            .map(|s| {
                let ttl = s.ttl();
                // Never renew past maxHold: the key then expires when the hold ends.
                match s.hold_until {
                    Some(h) => ttl.min(h.saturating_duration_since(started)),
                    None => ttl,
                }
            })
            .collect();
        let renewals: Vec<Renewal<'_>> = batch
            .iter()
            .zip(&ttls)
            .map(|(s, ttl)| Renewal {
                keys: &s.keys,
                token: &s.token,
                ttl_ms: ms_of(*ttl).max(1),
            })
            .collect();
        let shortest = ttls.iter().min().copied().unwrap_or_default();
        let timeout = self.cfg.node_timeout_for(shortest);
        let generations: Vec<u64> = batch.iter().map(|s| s.generation()).collect();
        let settle = |i: usize, answers: &[NodeAnswer]| {
            let state = &batch[i];
            let renewed = if state.generation() == generations[i] {
                self.settle_renewal(state, answers, started, ttls[i])
            } else {
                // A manual extend replaced the lease while this renewal was in flight.
                true
            };
            self.watchdog.done(state.id, renewed, started);
            renewed
        };
        let mut renewed_count = 0;
        let mut first_fault: Vec<Option<NodeAnswer>> = vec![None; self.nodes.len()];
        if self.cfg.cluster {
            let node = &self.nodes[0];
            let settled = join_all(renewals.iter().enumerate().map(|(i, r)| {
                let settle = &settle;
                async move {
                    let answer = [node.extend_one(r, timeout).await];
                    (settle(i, &answer), answer)
                }
            }))
            .await;
            for (renewed, [answer]) in settled {
                renewed_count += usize::from(renewed);
                if answer.is_fault() && first_fault[0].is_none() {
                    first_fault[0] = Some(answer);
                }
            }
        } else {
            let per_node = join_all(
                self.nodes
                    .iter()
                    .map(|n| n.extend_batch(&renewals, timeout)),
            )
            .await;
            for i in 0..batch.len() {
                let answers: Vec<NodeAnswer> = per_node.iter().map(|a| a[i].clone()).collect();
                for (j, a) in answers.iter().enumerate() {
                    if a.is_fault() && first_fault[j].is_none() {
                        first_fault[j] = Some(a.clone());
                    }
                }
                renewed_count += usize::from(settle(i, &answers));
            }
        }
        // One event per failing node per batch, not one per lock.
        for (node, fault) in self.nodes.iter().zip(&first_fault) {
            if let Some(a) = fault {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                self.emit(Event::NodeError {
                    node: &node.name,
                    answer: a,
                });
            }
        }
        if renewed_count > 0 {
            self.emit(Event::Renewed {
                count: renewed_count,
            });
        }
        self.watchdog.nudge();
    }

    /// Applies one renewal's answers to a lock; true when it was renewed.
    fn settle_renewal(
        self: &Arc<Self>,
        state: &Arc<LockState>,
        answers: &[NodeAnswer],
        started: Instant,
        ttl: Duration,
    ) -> bool {
        if state.status() != Status::Held {
            return false;
        }
        let t = tally(answers);
        let deadline = later(started, ttl.saturating_sub(self.cfg.drift_for(ttl)));
        if t.ok >= self.quorum() {
            // Each PEXPIRE replaces the key's TTL, so the new deadline replaces the old one.
            state.set_deadline(deadline);
            if deadline > Instant::now() {
                self.stats.renewed.fetch_add(1, Ordering::Relaxed);
                return true;
            }
            let label = state.label();
            let why = lost(
                &label,
                "its renewal was answered too late to leave any validity",
            );
            self.lose(state, why);
            return false;
        }
        if t.not_held + t.held > self.nodes.len() - self.quorum() {
            let label = state.label();
            self.lose(
                state,
                lost(
                    &label,
                    "its key was deleted or now holds another owner's token",
                )
                .with_nodes(self.reports(answers)),
            );
        }
        false
    }
}

/// The fence counter of `key`, in the same hash slot: a key with a hash tag
/// keeps it, any other key becomes the tag (which only works for a key without
/// `}`; cluster locks with fencing reject the rest).
pub fn fence_key(key: &str) -> String {
    let tagged = key
        .find('{')
        .and_then(|open| key[open + 1..].find('}').map(|close| close > 0))
        .unwrap_or(false);
    if tagged {
        format!("{key}:fence")
    } else {
        format!("{{{key}}}:fence")
    }
}

fn lost(label: &str, reason: &str) -> LockError {
    LockError::new(
        ErrorCode::Lost,
        format!("lock \"{label}\" was lost: {reason}"),
    )
    .with_key(label)
}

fn aborted(label: &str, attempts: u32) -> LockError {
    LockError::new(
        ErrorCode::Aborted,
        format!("acquiring lock \"{label}\" was aborted"),
    )
    .with_key(label)
    .with_attempts(attempts)
}

fn timed_out(last: LockError, wait: Duration) -> LockError {
    let mut e = LockError::new(
        ErrorCode::Timeout,
        format!(
            "waitTimeout of {} ms passed: {}",
            wait.as_millis(),
            last.message
        ),
    );
    e.key = last.key;
    e.attempts = last.attempts;
    e.remaining_ms = last.remaining_ms;
    e.nodes = last.nodes;
    e
}

struct LockHandle {
    state: Arc<LockState>,
    inner: Arc<Inner>,
}

impl Drop for LockHandle {
    /// A lock nobody can reach any more is never renewed again; its keys expire by TTL.
    fn drop(&mut self) {
        if self.state.end_released() {
            self.inner.watchdog.unwatch(self.state.id);
            self.inner.stats.held.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A held lock. Cheap to clone; when the last clone is dropped the watchdog
/// stops renewing it.
#[derive(Clone)]
pub struct Lock(Arc<LockHandle>);

/// The outcome of [`Lock::release`].
#[derive(Debug, Clone)]
pub struct Released {
    /// True when a quorum of nodes deleted our keys; false when it was no longer ours.
    pub released: bool,
}

impl Lock {
    fn state(&self) -> &Arc<LockState> {
        &self.0.state
    }

    pub fn id(&self) -> u64 {
        self.state().id
    }

    /// The keys as the caller named them.
    pub fn names(&self) -> Vec<String> {
        self.state().names().map(str::to_string).collect()
    }

    /// The first key as the caller named it.
    pub fn name(&self) -> &str {
        self.state().names().next().unwrap_or_default()
    }

    pub fn token(&self) -> &str {
        &self.state().token
    }

    /// Replicas that acknowledged the last acquisition or manual extension
    /// (`waitReplicas`); `None` when not asked for, or when WAIT failed.
    pub fn replicas(&self) -> Option<u32> {
        self.state().replicas()
    }

    pub fn attempts(&self) -> u32 {
        self.state().attempts
    }

    /// The fencing token handed out with this lock (client option `fencing`):
    /// larger for every later acquisition of the same key on that node.
    pub fn fence(&self) -> Option<i64> {
        self.state().fence
    }

    pub fn ttl(&self) -> Duration {
        self.state().ttl()
    }

    pub fn remaining(&self) -> Duration {
        self.state().remaining()
    }

    pub fn is_held(&self) -> bool {
        self.state().is_held()
    }

    pub fn status(&self) -> Status {
        self.state().status()
    }

    /// The monotonic instant the lock's validity ends (if not renewed).
    pub fn deadline(&self) -> Instant {
        self.state().deadline()
    }

    /// Why the lock was lost, if it was.
    pub fn loss(&self) -> Option<LockError> {
        self.state().loss()
    }

    /// Completes when the lock is released or lost.
    pub async fn ended(&self) {
        self.state().ended().await
    }

    /// Releases the lock everywhere. The watchdog stops first. `Ok(false)` when
    /// it had already been released or lost, or no longer held our token.
    pub async fn release(&self) -> Result<bool> {
        let state = self.state();
        let inner = &self.0.inner;
        if !state.end_released() {
            return Ok(false);
        }
        inner.watchdog.unwatch(state.id);
        inner.stats.held.fetch_sub(1, Ordering::Relaxed);
        let out = inner.release_state(state).await;
        if let Ok(true) = out {
            inner.stats.released.fetch_add(1, Ordering::Relaxed);
        }
        out
    }

    /// Extends the lease to `ttl` from now (same token) and makes `ttl` the
    /// lease the watchdog keeps renewing. Never recreates a missing key.
    pub async fn extend(&self, ttl: Duration) -> Result<()> {
        let state = self.state();
        let inner = &self.0.inner;
        let label = state.label();
        inner.ensure_open()?;
        match state.status() {
            Status::Held => {}
            Status::Released => return Err(lost(&label, "it was already released")),
            Status::Lost => {
                return Err(state.loss().unwrap_or_else(|| lost(&label, "it was lost")))
            }
        }
        let allowance = inner.cfg.drift_for(ttl);
        if ttl <= allowance {
            return Err(LockError::out_of_range(
                "ttl",
                &format!(
                    "longer than its clock-drift allowance ({} ms)",
                    allowance.as_millis()
                ),
                ttl.as_millis(),
            ));
        }
        // One PEXPIRE of this lock in flight at a time (see `LockState::lease_guard`).
        let _lease = state.lease_guard().await;
        if state.status() != Status::Held {
            return Err(state
                .loss()
                .unwrap_or_else(|| lost(&label, "it was released")));
        }
        state.next_generation();
        let started = Instant::now();
        let renewal = [Renewal {
            keys: &state.keys,
            token: &state.token,
            ttl_ms: ms_of(ttl),
        }];
        let timeout = inner.cfg.node_timeout_for(ttl);
        let answers: Vec<NodeAnswer> = match (state.wait_replicas, inner.nodes.as_slice()) {
            (Some(acked), [node]) => {
                let (answer, replicas) = node.extend_acked(&renewal[0], timeout, acked).await;
                state.set_replicas(replicas);
                vec![answer]
            }
            _ => join_all(
                inner
                    .nodes
                    .iter()
                    .map(|n| n.extend_batch(&renewal, timeout)),
            )
            .await
            .into_iter()
            .map(|mut a| a.remove(0))
            .collect(),
        };
        inner.report_faults(&answers);
        let t = tally(&answers);
        let deadline = later(started, ttl.saturating_sub(inner.cfg.drift_for(ttl)));
        if state.status() != Status::Held {
            return Err(state
                .loss()
                .unwrap_or_else(|| lost(&label, "it was released")));
        }
        if t.ok >= inner.quorum() {
            // The keys now carry the new TTL whatever we do: the deadline follows them.
            state.set_deadline(deadline);
            if deadline <= Instant::now() {
                let why = lost(
                    &label,
                    "the extension was answered too late to leave any validity",
                );
                inner.lose(state, why.clone());
                return Err(why);
            }
            let every = state
                .renew_every()
                .min(ttl / 3)
                .max(Duration::from_millis(1));
            state.set_ttl(ttl, every);
            inner.watchdog.reschedule(state.id);
            inner.stats.renewed.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        if t.not_held > inner.nodes.len() - inner.quorum() {
            let why = lost(
                &label,
                "its key was deleted or now holds another owner's token",
            )
            .with_nodes(inner.reports(&answers));
            inner.lose(state, why.clone());
            return Err(why);
        }
        let err = if inner.nodes.len() == 1 {
            single_node_error(&inner.nodes[0].name, &answers[0])
        } else {
            LockError::new(
                ErrorCode::Quorum,
                format!(
                    "extend of \"{label}\": {} of {} nodes agreed, {} needed",
                    t.ok,
                    inner.nodes.len(),
                    inner.quorum()
                ),
            )
        };
        Err(err.with_key(label).with_nodes(inner.reports(&answers)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fence_key_names() {
        assert_eq!(fence_key("lock:order:1"), "{lock:order:1}:fence");
        assert_eq!(fence_key("a{user:7}b"), "a{user:7}b:fence");
        // Not the slot of "a{}b": a cluster lock with fencing rejects such keys.
        assert_eq!(fence_key("a{}b"), "{a{}b}:fence");
    }

    #[test]
    fn tokens_are_masked() {
        assert_eq!(mask("0123456789abcdef"), "01234567…");
    }
}
