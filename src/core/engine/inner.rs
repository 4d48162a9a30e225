//! What every lock of one client shares: its nodes, settings, watchdog,
//! waiting queues and counters, and the steps every operation ends with
//! (report node faults, finish the nodes still out in the background); how
//! a held lock ends is `ending.rs`.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use tokio::sync::Notify;

use crate::core::base::{wait_until, Closing};
use crate::core::config::ClientConfig;
use crate::core::engine::health::{self, Health};
use crate::core::engine::stats::Stats;
use crate::core::engine::waiters::Waiters;
use crate::core::engine::watchdog::Watchdog;
use crate::core::error::{LockError, NodeAnswer, NodeReport, Result};
use crate::core::model::LockKind;
use crate::core::quorum::{self};
use crate::core::transport::tokio::collect::Collect;
use crate::core::transport::tokio::Node;

/// What the client reports as it happens, e.g. to raise JS events.
#[non_exhaustive]
pub enum Event<'a> {
    /// A held lock was lost; `id` is `Lock::id`.
    Lost { id: u64, error: &'a LockError },
    /// A node failed to answer (the operation may still have succeeded on a quorum).
    NodeError {
        node: &'a str,
        answer: &'a NodeAnswer,
        /// Identical faults of this node not reported since it last was
        /// (see `health.rs`).
        repeated: u64,
    },
    /// A renewal batch renewed `count` locks.
    Renewed { count: usize },
    /// A node answered again after an outage (see `health.rs`).
    NodeUp {
        node: &'a str,
        /// How long it was down.
        down_ms: u64,
        /// Its faults meanwhile, reported or not.
        faults: u64,
    },
}

pub type EventHook = Arc<dyn Fn(Event<'_>) + Send + Sync>;

pub(crate) struct Inner {
    pub cfg: ClientConfig,
    pub nodes: Vec<Node>,
    /// Each node's name, in order (shared by every acquisition's plan).
    pub node_names: Arc<[String]>,
    /// Some node is not a cluster: release notices reach its waiters (a
    /// cluster would broadcast every notice to all its nodes).
    pub hears_notices: bool,
    /// Some node is a Redis Cluster (a lock's keys keep to one hash slot).
    pub has_cluster: bool,
    /// `close()` ended the held locks: nothing more is sent for this client.
    pub closed: AtomicBool,
    /// Begun when `close()` is called: no new acquisition or adoption is
    /// taken, and one waiting for its next attempt ends with `ERR_LOCK_CLOSED`
    /// then, not at its next timer. Held locks stay held (and may be extended)
    /// until `closed`.
    pub closing: Closing,
    pub stats: Stats,
    /// Each node's health: up, or down and probed until it answers.
    pub health: Health,
    pub watchdog: Watchdog,
    /// Held while a renewal part is out (see `renew.rs`).
    pub renewing: tokio::sync::Mutex<()>,
    hook: Option<EventHook>,
    /// Callers waiting for a held key, woken by its release notice.
    pub waiters: Arc<Waiters>,
    /// Cleanup releases going on after their caller has been answered.
    background: Background,
    /// This client, for the tasks it starts itself (a node's probe).
    me: Weak<Inner>,
}

/// Tasks the caller does not wait for but `close()` does.
#[derive(Default)]
struct Background {
    running: AtomicUsize,
    idle: Notify,
}

/// Counts one background task for as long as it lives (even if it panics).
pub(crate) struct Running(Arc<Inner>);

impl Drop for Running {
    fn drop(&mut self) {
        let background = &self.0.background;
        if background.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            background.idle.notify_waiters();
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.watchdog.stop();
    }
}

impl Inner {
    pub fn new(cfg: ClientConfig, nodes: Vec<Node>, hook: Option<EventHook>) -> Arc<Inner> {
        let nodes_len = nodes.len();
        Arc::new_cyclic(|me| Inner {
            me: me.clone(),
            cfg,
            node_names: nodes.iter().map(|n| n.name.clone()).collect(),
            hears_notices: nodes.iter().any(|n| !n.is_cluster()),
            has_cluster: nodes.iter().any(|n| n.is_cluster()),
            nodes,
            closed: AtomicBool::new(false),
            closing: Closing::default(),
            stats: Stats::default(),
            health: Health::new(nodes_len),
            watchdog: Watchdog::default(),
            renewing: tokio::sync::Mutex::new(()),
            hook,
            waiters: Arc::default(),
            background: Background::default(),
        })
    }

    /// Runs `task` on its own; [`Inner::settled`] waits for it.
    pub fn in_background(self: &Arc<Self>, task: impl Future<Output = ()> + Send + 'static) {
        self.background.running.fetch_add(1, Ordering::AcqRel);
        let running = Running(self.clone());
        // No runtime left (the environment ends): dropped, and no longer counted.
        crate::core::base::spawn(async move {
            let _running = running;
            task.await
        });
    }

    /// Counts work going on outside any task (the fast path's nodes still
    /// out) as a background task until the guard is dropped.
    pub(crate) fn track(self: &Arc<Self>) -> Running {
        self.background.running.fetch_add(1, Ordering::AcqRel);
        Running(self.clone())
    }

    /// Completes once no background task runs.
    pub async fn settled(&self) {
        let b = &self.background;
        wait_until(&b.idle, || b.running.load(Ordering::Acquire) == 0).await
    }

    /// The kind of the lock a token from elsewhere (`adopt`, a release by
    /// token) holds at `keys`, as the server shows it: a fair lock when a
    /// fair lock's line waits beside its one key (then its release hands the
    /// key on). A plain release of a fair lock nobody waits for is the same
    /// delete; one that a waiter joins meanwhile wakes that waiter by its
    /// notice, and its next attempt takes the key.
    pub async fn stored_kind(&self, keys: &[String]) -> LockKind {
        match (keys, self.nodes.as_slice()) {
            ([key], [node]) if node.has_fair_line(key, self.cfg.command_timeout).await => {
                LockKind::Fair
            }
            _ => LockKind::Plain,
        }
    }

    pub fn emit(&self, event: Event<'_>) {
        if let Some(hook) = &self.hook {
            hook(event);
        }
    }

    /// Counts a fault of node `node` and reports it (coalesced: see
    /// `health.rs`); one that begins an outage starts probing the node.
    pub fn report_fault(&self, node: usize, answer: &NodeAnswer) {
        self.stats.errors.fetch_add(1, Ordering::Relaxed);
        let verdict = self.health.fault(node, answer, Instant::now());
        if let Some(repeated) = verdict.report {
            self.emit(Event::NodeError {
                node: &self.nodes[node].name,
                answer,
                repeated,
            });
        }
        if verdict.went_down {
            self.probe(node);
        }
    }

    pub fn report_faults(&self, answers: &[NodeAnswer]) {
        for (node, answer) in answers.iter().enumerate() {
            if answer.is_fault() {
                self.report_fault(node, answer);
            }
        }
    }

    /// PINGs node `node`, at growing intervals, until it answers (then the
    /// `NodeUp` event) or the client closes. Holds the client only while a
    /// PING is out.
    fn probe(&self, node: usize) {
        let client = self.me.clone();
        let closing = self.closing.token();
        crate::core::base::spawn(async move {
            let mut pause = health::PROBE_FIRST;
            loop {
                tokio::select! {
                    _ = closing.cancelled() => return,
                    _ = tokio::time::sleep(pause) => {}
                }
                let Some(inner) = client.upgrade() else {
                    return;
                };
                let answer = tokio::select! {
                    _ = closing.cancelled() => return,
                    answer = inner.nodes[node].ping(inner.cfg.command_timeout) => answer,
                };
                if !answer.is_transient() {
                    if let Some(back) = inner.health.answered(node, Instant::now()) {
                        inner.emit(Event::NodeUp {
                            node: &inner.nodes[node].name,
                            down_ms: back.down_ms,
                            faults: back.faults,
                        });
                    }
                    return;
                }
                pause = health::next_probe(pause);
            }
        });
    }

    /// Each node's answer, by name.
    pub fn reports(&self, answers: &[NodeAnswer]) -> Vec<NodeReport> {
        self.nodes
            .iter()
            .zip(answers)
            .map(|(n, a)| NodeReport {
                node: n.name.clone(),
                answer: a.clone(),
            })
            .collect()
    }

    /// [`quorum::no_quorum`] over these answers.
    pub fn no_quorum(&self, answers: &[NodeAnswer], message: impl FnOnce() -> String) -> LockError {
        quorum::no_quorum(self.reports(answers), message)
    }

    /// `close()` was called: no new acquisition or adoption is taken, and
    /// those waiting end (see [`Inner::closing`]).
    pub fn begin_close(&self) {
        self.closing.begin();
    }

    /// `Err(ERR_LOCK_CLOSED)` once `close()` was called: for what takes a
    /// new lock (an acquisition, an adoption).
    pub fn ensure_accepting(&self) -> Result<()> {
        if self.closing.begun() {
            Err(LockError::closed())
        } else {
            Ok(())
        }
    }

    /// `Err(ERR_LOCK_CLOSED)` once `close()` ended the held locks: for what
    /// works on a lock already held (an extend, a hand-over, a read).
    pub fn ensure_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(LockError::closed())
        } else {
            Ok(())
        }
    }

    /// Hands the nodes of `collect` still out to a background task, which
    /// reports their faults as they come and records their answers late.
    pub fn finish_in_background<T: Send + 'static>(self: &Arc<Self>, collect: Collect<T>) {
        if collect.all_in() {
            return;
        }
        let reporter = self.clone();
        self.in_background(async move {
            collect
                .finish(|i, answer| reporter.report_fault(i, answer))
                .await;
        });
    }
}
