//! What every lock of one client shares: its nodes, settings, watchdog,
//! waiting queues and counters, and the steps every operation ends with
//! (report node faults, finish the nodes still out in the background, release
//! and extend at quorum, declare a lock lost).

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::core::broken;
use crate::core::config::ClientConfig;
use crate::core::engine::health::{self, Health};
use crate::core::engine::lock_state::{LockState, Release};
use crate::core::engine::stats::Stats;
use crate::core::engine::waiters::Waiters;
use crate::core::engine::watchdog::Watchdog;
use crate::core::error::{LockError, NodeAnswer, NodeReport, Result};
use crate::core::model::{Answers, LockKind};
use crate::core::ops::gather::Gather;
use crate::core::quorum::{self, Released, Tally};
use crate::core::time::{later, wait_until};
use crate::core::transport::tokio::collect::{Call, Collect};
use crate::core::transport::tokio::{Node, Renewal};

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
    /// `close()` ended the held locks: nothing more is sent for this client.
    pub closed: AtomicBool,
    /// Cancelled when `close()` is called: no new acquisition or adoption is
    /// taken, and one waiting for its next attempt ends with `ERR_LOCK_CLOSED`
    /// then, not at its next timer. Held locks stay held (and may be extended)
    /// until `closed`.
    pub closing: CancellationToken,
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
            nodes,
            closed: AtomicBool::new(false),
            closing: CancellationToken::new(),
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
        crate::core::sync::spawn(async move {
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
        let closing = self.closing.clone();
        crate::core::sync::spawn(async move {
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

    /// `Err(ERR_LOCK_CLOSED)` once `close()` was called: for what takes a
    /// new lock (an acquisition, an adoption).
    pub fn ensure_accepting(&self) -> Result<()> {
        if self.closing.is_cancelled() {
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

    /// Ends `state` as released in this process, before anything is sent: the
    /// watchdog stops renewing it and it no longer counts as held. False when
    /// it had already ended (released, lost, handed over or dropped).
    pub(crate) fn let_go(&self, state: &LockState) -> bool {
        self.stop_holding(state, state.end_released())
    }

    /// Ends `state` as handed over: as [`Inner::let_go`], and nothing is
    /// sent, now or later.
    pub(crate) fn hand_over(&self, state: &LockState) -> bool {
        self.stop_holding(state, state.end_handed_over())
    }

    fn stop_holding(&self, state: &LockState, ended: bool) -> bool {
        if !ended {
            return false;
        }
        self.watchdog.unwatch(state);
        self.stats.held.fetch_sub(1, Ordering::Relaxed);
        true
    }

    /// The verdict of a caller's release (after [`Inner::let_go`]), counted;
    /// either driver gathers the answers. Keys gone or another owner's mean
    /// the lock was lost before the release: it is recorded as lost, and the
    /// caller reports the loss it is given.
    pub(crate) fn released_by_caller(
        &self,
        state: &LockState,
        answers: &[NodeAnswer],
    ) -> Result<Release> {
        if self.release_verdict(state, answers)? {
            self.stats.released.fetch_add(1, Ordering::Relaxed);
            return Ok(Release::Released);
        }
        match state.lost_before_release() {
            Some(loss) => {
                self.stats.lost.fetch_add(1, Ordering::Relaxed);
                Ok(Release::Lost(loss))
            }
            None => Ok(Release::NotHeld),
        }
    }

    /// Sends a token-checked release everywhere; the lock has already ended locally.
    /// Resolves once a quorum deleted our keys: on a minority of nodes the
    /// release may still be on its way (a background task `close()` awaits).
    pub async fn release_state(self: &Arc<Self>, state: &LockState) -> Result<bool> {
        let answers = self.release_until_decided(state, None).await;
        self.release_verdict(state, &answers)
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

    /// Token-checked release of a lock's keys on every node, answered once a
    /// quorum deleted them (or, failing that, once every node answered).
    /// With `longest`, only keys whose lease has no more than that left go
    /// (the cleanup of a lock that lapsed).
    pub(crate) async fn release_until_decided(
        self: &Arc<Self>,
        state: &LockState,
        longest: Option<Duration>,
    ) -> Vec<NodeAnswer> {
        let longest_ms = longest.map(crate::core::time::ms_of);
        let timeout = self.cfg.command_timeout;
        let keys: Arc<[String]> = Arc::from(&state.keys[..]);
        let token: Arc<str> = state.token.as_str().into();
        let kind = state.kind;
        let calls = (0..self.nodes.len())
            .map(|i| -> Call<()> {
                let (inner, keys, token) = (self.clone(), keys.clone(), token.clone());
                Box::pin(async move {
                    let answer = inner.nodes[i]
                        .release(&keys, &token, kind, longest_ms, timeout)
                        .await;
                    (answer, ())
                })
            })
            .collect();
        let mut collect = Collect::new(calls, Some(state.answers.clone()));
        let answers = collect.until(Gather::at_quorum).await;
        self.finish_in_background(collect);
        answers
    }

    /// One lock's extension on every node, answered once a quorum re-armed
    /// its keys (or, failing that, once every node answered).
    pub(crate) async fn extend_until_decided(
        self: &Arc<Self>,
        renewal: &Renewal<'_>,
        timeout: Duration,
        record: &Answers,
    ) -> Vec<NodeAnswer> {
        let keys: Arc<[String]> = renewal.keys.into();
        let token: Arc<str> = renewal.token.into();
        let ttl_ms = renewal.ttl_ms;
        let calls = (0..self.nodes.len())
            .map(|i| -> Call<()> {
                let (inner, keys, token) = (self.clone(), keys.clone(), token.clone());
                Box::pin(async move {
                    let one = [Renewal {
                        keys: &keys,
                        token: &token,
                        ttl_ms,
                    }];
                    let mut answers = inner.nodes[i].extend_batch(&one, timeout).await;
                    (answers.pop().unwrap_or(NodeAnswer::Timeout), ())
                })
            })
            .collect();
        let mut collect = Collect::new(calls, Some(record.clone()));
        let answers = collect.until(Gather::at_quorum).await;
        self.finish_in_background(collect);
        answers
    }

    /// What a release's answers (decided at quorum) mean for its caller.
    pub(crate) fn release_verdict(
        &self,
        state: &LockState,
        answers: &[NodeAnswer],
    ) -> Result<bool> {
        let answers = answers.to_vec();
        self.report_faults(&answers);
        match quorum::released(&Tally::of(&answers)) {
            Released::Released => Ok(true),
            Released::NotOurs => Ok(false),
            Released::NoQuorum => {
                let label = state.label();
                let err = self.no_quorum(&answers, || {
                    format!("release of \"{label}\" reached too few nodes")
                });
                let message = format!("{}; the lock expires by its TTL", err.message);
                Err(LockError { message, ..err }.with_key(label))
            }
        }
    }

    /// Ends a held lock as lost: notifies once, then releases it everywhere
    /// (token-checked, so only what is still ours goes).
    pub fn lose(self: &Arc<Self>, state: &Arc<LockState>, why: LockError) {
        self.end_lost(state, why, Cleanup::Release);
    }

    /// Ends a held lock whose validity ran out as lost, then frees what is
    /// still its own at once rather than at its TTL (renewals whose replies
    /// were lost may have landed): a token-checked release of each key whose
    /// lease is no longer than this lock's `ttl`, the longest its own
    /// renewals set (a fair lock's key goes to the next waiter in line). A
    /// key continued with a longer lease by a client that adopted the token
    /// is left to it.
    pub fn lapse(self: &Arc<Self>, state: &Arc<LockState>, why: LockError) {
        let cleanup = if broken::cleans_up_lapsed() {
            // Broken on purpose, plain-del: a naive lock cleans up whatever happened.
            Cleanup::Release
        } else {
            Cleanup::Within(state.ttl())
        };
        self.end_lost(state, why, cleanup);
    }

    fn end_lost(self: &Arc<Self>, state: &Arc<LockState>, why: LockError, cleanup: Cleanup) {
        if broken::swallows_losses() {
            // Broken on purpose: keep believing in the lock and keep renewing.
            state.set_deadline(later(Instant::now(), state.ttl()));
            self.watchdog.watch(state.clone());
            return;
        }
        if !state.end_lost(why.clone()) {
            return;
        }
        self.watchdog.unwatch(state);
        self.stats.lost.fetch_add(1, Ordering::Relaxed);
        self.stats.held.fetch_sub(1, Ordering::Relaxed);
        self.emit(Event::Lost {
            id: state.id,
            error: &why,
        });
        state.notify_ended();
        let longest = match cleanup {
            Cleanup::Release => None,
            Cleanup::Within(ttl) => Some(ttl),
        };
        let inner = self.clone();
        let state = state.clone();
        self.in_background(async move {
            let answers = inner.release_until_decided(&state, longest).await;
            let _ = inner.release_verdict(&state, &answers);
        });
    }
}

/// What follows a loss on the nodes.
enum Cleanup {
    /// A token-checked release.
    Release,
    /// A token-checked release of the keys with no more than this left.
    Within(Duration),
}
