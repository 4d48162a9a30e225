//! Taking a lock: attempt on every node → verdict → take it, or undo the
//! attempt and pause (woken early by the holder's release notice), until the
//! lock is won, the wait ends, or the caller cancels. The caller's bounds
//! (`waitTimeout`, cancellation) hold while an attempt is in flight too; the
//! undo of an attempt the caller no longer waits for goes on in the background.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use rand::Rng;
use tokio_util::sync::CancellationToken;

use crate::core::broken;
use crate::core::config::AcquireSpec;
use crate::core::error::{ErrorCode, LockError, NodeAnswer, Result};
use crate::core::keys;
use crate::core::lock::Lock;
use crate::core::lock_state::{Answers, LockState, NewLock};
use crate::core::quorum::fanout::{Call, FanOut};
use crate::core::quorum::{self, Acquired, Tally};
use crate::core::shared::Inner;
use crate::core::time::{later, ms_of};

mod fair;
mod permits;
mod queue;
pub use fair::{fair, line_keys, FairLease};
pub use permits::{is_slot_attempt, Kind, Lease, Permits};
use queue::Queued;

/// A checked acquisition, ready to send.
pub struct Request {
    pub(crate) names: Vec<String>,
    pub(crate) spec: AcquireSpec,
    /// Permits of a semaphore rather than a lock.
    pub(crate) permits: Option<Permits>,
}

impl Request {
    /// The resolved options.
    pub fn spec(&self) -> &AcquireSpec {
        &self.spec
    }
}

/// What one attempt on every node came back with.
pub(crate) struct Attempt {
    pub answers: Vec<NodeAnswer>,
    /// The same, filled in by nodes answering after the outcome was decided.
    pub record: Answers,
    /// The highest fence value handed out.
    pub fence: i64,
    /// When the first request was sent.
    pub started: Instant,
    /// Replicas that acknowledged (`waitReplicas`).
    pub replicas: Option<u32>,
    /// Whether the script went out to each node (not when its connection failed).
    pub sent: Vec<bool>,
    /// Nodes that answered as contended but wrote (a semaphore on several
    /// nodes: slots other than the quorum's); empty for other attempts.
    pub stray: Vec<bool>,
    /// The token the holder keeps when it differs from the attempt's (a
    /// semaphore on several nodes: the member naming its slots).
    pub member: Option<String>,
}

/// A first attempt made elsewhere (the fast path) that did not take the lock:
/// the acquisition goes on from it as if its own loop had made it.
pub struct Resume {
    pub(crate) request: Request,
    pub(crate) token: String,
    pub(crate) attempt: Attempt,
}

/// What a won attempt registers.
pub(crate) struct Won<'a> {
    pub keys: Vec<String>,
    pub token: String,
    pub attempts: u32,
    pub started: Instant,
    pub spec: &'a AcquireSpec,
    pub attempt: &'a Attempt,
}

impl Attempt {
    /// The nodes whose keys may hold our token: the script went out, and the
    /// node did not answer "held by another" (then it provably wrote nothing).
    pub(crate) fn to_undo(&self) -> Vec<usize> {
        (0..self.answers.len())
            .filter(|&i| {
                self.sent[i]
                    && (self.stray.get(i).copied().unwrap_or(false)
                        || !matches!(self.answers[i], NodeAnswer::Held { .. }))
            })
            .collect()
    }
}

impl Inner {
    pub async fn acquire(
        self: &Arc<Self>,
        request: Request,
        cancel: CancellationToken,
    ) -> Result<Lock> {
        self.acquire_from(request, cancel, None).await
    }

    /// Goes on with an acquisition whose first attempt (and token) came from
    /// elsewhere.
    pub async fn acquire_resumed(
        self: &Arc<Self>,
        resume: Resume,
        cancel: CancellationToken,
    ) -> Result<Lock> {
        let Resume {
            request,
            token,
            attempt,
        } = resume;
        self.acquire_from(request, cancel, Some((token, attempt)))
            .await
    }

    async fn acquire_from(
        self: &Arc<Self>,
        request: Request,
        cancel: CancellationToken,
        mut first: Option<(String, Attempt)>,
    ) -> Result<Lock> {
        let Request {
            names,
            spec,
            permits,
        } = request;
        if first.is_none() {
            // (A resumed attempt may hold keys: closing is handled after it, with its undo.)
            self.ensure_open()?;
        }
        let keys = keys::prefixed(&self.cfg.key_prefix, &names);
        let script_keys = keys::script_keys(&keys, self.cfg.fencing);
        let key_label = names.join(", ");
        let began = first.as_ref().map_or_else(Instant::now, |(_, a)| a.started);
        let wait_until = began + spec.wait_timeout;
        let drift = self.cfg.drift_for(spec.ttl);
        let n = self.nodes.len();
        let mut token = match &mut first {
            Some((t, _)) => std::mem::take(t),
            None => permits::token(permits),
        };
        let mut attempts: u32 = 0;
        // Waiting for one key: queue up for its release notices from the plain
        // masters (cluster members send none; their waiters keep the retry timer).
        let notices = keys.len() == 1 && self.nodes.iter().any(|n| !n.is_cluster());
        let mut queued: Option<Queued> = None;
        let undo_timeout = self.cfg.node_timeout_for(spec.ttl);
        // A fair waiter that stops waiting leaves the line at once.
        let mut line = fair::LinePlace::of(self, permits, &keys[0], &token, &spec, undo_timeout);
        let every_node: Vec<usize> = (0..n).collect();
        // waitTimeout 0 asks for one attempt with no waiting: that attempt keeps
        // its own bound (the node timeout).
        let wait_bounds_attempts = !spec.wait_timeout.is_zero();
        let mut last_failure: Option<LockError> = None;
        loop {
            if cancel.is_cancelled() {
                return Err(aborted(&key_label, attempts));
            }
            attempts += 1;
            if attempts > 1 && n > 1 {
                // Redlock: a fresh value per attempt. One node keeps its token, so an
                // earlier attempt that landed without a reply still counts as ours.
                token = permits::token(permits);
            }
            // A release after this attempt reads the key will wake us.
            let heard = queued.as_ref().is_some_and(Queued::heard);
            let attempt = if let Some((_, attempt)) = first.take() {
                attempt
            } else {
                tokio::select! {
                    attempt = self.attempt_for(permits, &script_keys, keys.len(), &token, &spec) => attempt,
                    _ = cancel.cancelled() => {
                        self.undo_in_background(keys, token, every_node, undo_timeout);
                        return Err(aborted(&key_label, attempts));
                    }
                    _ = tokio::time::sleep_until(wait_until.into()), if wait_bounds_attempts => {
                        self.undo_in_background(keys, token, every_node, undo_timeout);
                        return Err(wait_passed(last_failure, &key_label, attempts, spec.wait_timeout));
                    }
                }
            };
            let started = broken::validity_start(attempt.started);
            let answers = &attempt.answers;
            self.report_faults(answers);
            let t = Tally::of(answers);
            let elapsed = started.elapsed();
            let validity = quorum::validity(spec.ttl, elapsed, drift);
            let verdict = quorum::acquired(&t, validity, spec.min_validity);
            if verdict == Acquired::Won && !cancel.is_cancelled() && self.ensure_open().is_ok() {
                let token = attempt.member.clone().unwrap_or(token);
                let lock = self.register(Won {
                    keys,
                    token,
                    attempts,
                    started,
                    spec: &spec,
                    attempt: &attempt,
                });
                if let Some(line) = line.as_mut() {
                    line.taken();
                }
                if self.ensure_open().is_err() {
                    // close() ran while this lock was being registered: give it back.
                    let _ = lock.release().await;
                    return Err(LockError::closed());
                }
                return Ok(lock);
            }
            if t.held > 0 {
                self.stats.contended.fetch_add(1, Ordering::Relaxed);
            }
            let to_undo = attempt.to_undo();
            if let Err(closed) = self.ensure_open() {
                self.undo_in_background(keys, token, to_undo, undo_timeout);
                return Err(closed);
            }
            if cancel.is_cancelled() {
                self.undo_in_background(keys, token, to_undo, undo_timeout);
                return Err(aborted(&key_label, attempts));
            }
            let failure = match verdict {
                Acquired::Contended { longest_pttl } => {
                    let mut e = LockError::new(
                        ErrorCode::Taken,
                        match longest_pttl {
                            Some(ms) => format!(
                                "lock \"{key_label}\" is held by another owner for another {ms} ms ({attempts} attempt(s))"
                            ),
                            None => format!(
                                "lock \"{key_label}\" is held by another owner ({attempts} attempt(s))"
                            ),
                        },
                    );
                    e.remaining_ms = longest_pttl;
                    e.with_nodes(self.reports(answers))
                }
                Acquired::TooLate | Acquired::Won => LockError::new(
                    ErrorCode::Timeout,
                    format!(
                        "lock \"{key_label}\" was taken too late to be of use: {} ms of its {} ms ttl went by",
                        elapsed.as_millis(),
                        spec.ttl.as_millis()
                    ),
                )
                .with_nodes(self.reports(answers)),
                Acquired::NoQuorum => self.no_quorum(answers, || {
                    let detail: Vec<String> = self
                        .reports(answers)
                        .iter()
                        .map(|r| format!("{} {}", r.node, r.answer))
                        .collect();
                    format!(
                        "lock \"{key_label}\": {} of {n} nodes agreed, {} needed ({})",
                        t.ok,
                        t.needed(),
                        detail.join("; ")
                    )
                }),
            };
            let failure = failure.with_key(key_label.clone()).with_attempts(attempts);
            // Only contention is worth waiting out; unreachable nodes fail fast.
            let contended = matches!(verdict, Acquired::Contended { .. });
            let retries_left = spec.retry_count.is_none_or(|r| attempts <= r);
            if !contended || !retries_left {
                self.undo_in_background(keys, token, to_undo, undo_timeout);
                return Err(failure);
            }
            if Instant::now() >= wait_until {
                self.undo_in_background(keys, token, to_undo, undo_timeout);
                return Err(timed_out(failure, spec.wait_timeout));
            }
            // Retrying: the undo lands before the next attempt (one node keeps its
            // token, so a late undo could delete the next attempt's key).
            tokio::select! {
                _ = self.undo(&keys, &token, &to_undo, undo_timeout) => {}
                _ = cancel.cancelled() => {
                    self.undo_in_background(keys, token, to_undo, undo_timeout);
                    return Err(aborted(&key_label, attempts));
                }
                _ = tokio::time::sleep_until(wait_until.into()) => {
                    self.undo_in_background(keys, token, to_undo, undo_timeout);
                    return Err(timed_out(failure, spec.wait_timeout));
                }
            }
            let now = Instant::now();
            if now >= wait_until {
                return Err(timed_out(failure, spec.wait_timeout));
            }
            let jitter_ms = ms_of(spec.retry_jitter);
            let jitter = Duration::from_millis(rand::rng().random_range(0..=jitter_ms));
            let mut pause = spec.retry_delay + jitter;
            if let Some(ms) = t.longest_pttl {
                let lease_end = Duration::from_millis(ms.saturating_add(1));
                pause = if heard {
                    // Its release wakes us: no polling, only a bound for a holder
                    // that vanished (or a notice lost to a cut) at its lease's end.
                    lease_end + jitter
                } else {
                    // The holder's lease ends sooner than our pause: try right after it.
                    pause.min(lease_end)
                };
            }
            let mut pause = pause.min(wait_until - now);
            last_failure = Some(failure);
            if queued.is_none() && notices {
                // (A release before the subscription is in place goes unheard:
                // the retry timer covers it, as it covers a lost notice.)
                queued = Some(tokio::select! {
                    q = self.queue_up(&keys[0], &token, pause) => q,
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
                    Some(q) => q.place.woken().await,
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
                q.place.consume();
            }
        }
    }

    /// Registers a won attempt as a held lock, renewed by the watchdog (which
    /// this starts, so it runs within the runtime).
    pub(crate) fn register(self: &Arc<Self>, won: Won<'_>) -> Lock {
        let Won {
            keys,
            token,
            attempts,
            started,
            spec,
            attempt,
        } = won;
        let drift = self.cfg.drift_for(spec.ttl);
        let state = Arc::new(LockState::new(NewLock {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            keys,
            prefix_len: self.cfg.key_prefix.len(),
            token,
            attempts,
            deadline: later(started, spec.ttl.saturating_sub(drift)),
            ttl: spec.ttl,
            renew_every: spec.renew_interval,
            hold_until: spec.max_hold.map(|h| later(started, h)),
            auto_renew: spec.auto_renew,
            fence: self.cfg.fencing.then_some(attempt.fence),
            wait_replicas: spec.wait_replicas,
            answers: attempt.record.clone(),
        }));
        state.set_replicas(attempt.replicas);
        self.stats.acquired.fetch_add(1, Ordering::Relaxed);
        self.stats.held.fetch_add(1, Ordering::Relaxed);
        self.watchdog.start(self);
        self.watchdog.watch(state.clone());
        Lock::new(state, self.clone())
    }

    /// One parallel attempt on every node. `script_keys` holds the `locked`
    /// lock keys followed by their fence counters.
    async fn attempt(
        self: &Arc<Self>,
        script_keys: &[String],
        locked: usize,
        token: &str,
        spec: &AcquireSpec,
    ) -> Attempt {
        let ttl_ms = ms_of(spec.ttl);
        let timeout = self.cfg.node_timeout_for(spec.ttl);
        if let (Some(acked), [node]) = (spec.wait_replicas, self.nodes.as_slice()) {
            // One master with replicas: the write and its WAIT on a connection of their own.
            let started = Instant::now();
            let (answer, fence, replicas) = node
                .acquire_acked(script_keys, locked, token, ttl_ms, timeout, acked)
                .await;
            return Attempt {
                record: Answers::of(vec![answer.clone()]),
                answers: vec![answer],
                fence,
                started,
                replicas,
                sent: vec![true],
                stray: Vec::new(),
                member: None,
            };
        }
        // Connect first (instant once connected), so that the validity clock,
        // which starts before the first SET is sent, does not pay for a handshake.
        // With several nodes one that cannot connect must not hold up the others:
        // it gets the node timeout (its connect goes on in the background).
        let cons = join_all(self.nodes.iter().map(|n| async move {
            if self.nodes.len() > 1 {
                n.connection_within(timeout).await
            } else {
                n.connection().await
            }
        }))
        .await;
        let sent = cons.iter().map(Result::is_ok).collect();
        let script_keys: Arc<[String]> = script_keys.into();
        let token: Arc<str> = token.into();
        let started = Instant::now();
        let calls: Vec<Call<i64>> = cons
            .into_iter()
            .enumerate()
            .map(|(i, con)| -> Call<i64> {
                let (inner, keys, token) = (self.clone(), script_keys.clone(), token.clone());
                Box::pin(async move {
                    match con {
                        Ok(mut con) => {
                            inner.nodes[i]
                                .acquire(&mut con, &keys, locked, &token, ttl_ms, timeout)
                                .await
                        }
                        Err(answer) => (answer, 0),
                    }
                })
            })
            .collect();
        let mut fan = FanOut::new(calls);
        // Redlock resolves once a quorum took the lock in time; the other nodes
        // finish in the background (a late grant there is ours to renew and
        // release). Fencing needs the highest value over every granting node,
        // and a failed attempt names every node's answer: both wait for all.
        let drift = self.cfg.drift_for(spec.ttl);
        fan.until(|t| {
            !self.cfg.fencing
                && t.agreed()
                && quorum::validity(spec.ttl, broken::validity_start(started).elapsed(), drift)
                    >= spec.min_validity
        })
        .await;
        let answers = fan.answers();
        let record = Answers::default();
        let op = record.start(answers.clone());
        let attempt = Attempt {
            fence: fan.extras().copied().max().unwrap_or(0),
            answers,
            record: record.clone(),
            started,
            replicas: None,
            sent,
            stray: Vec::new(),
            member: None,
        };
        fan.finish_in_background(self, Some((record, op)));
        attempt
    }

    /// Token-checked release of an attempt on `nodes` (see [`Attempt::to_undo`]).
    /// Waits no longer than the attempt itself could: a release queued behind a
    /// stalled node's SET still runs after it, in order, on the same connection.
    async fn undo(&self, keys: &[String], token: &str, nodes: &[usize], timeout: Duration) {
        join_all(
            nodes
                .iter()
                .map(|&i| self.nodes[i].release(keys, token, timeout)),
        )
        .await;
    }
}

fn aborted(label: &str, attempts: u32) -> LockError {
    LockError::new(
        ErrorCode::Aborted,
        format!("acquiring lock \"{label}\" was aborted"),
    )
    .with_key(label)
    .with_attempts(attempts)
}

/// The wait ended while an attempt was in flight.
fn wait_passed(last: Option<LockError>, label: &str, attempts: u32, wait: Duration) -> LockError {
    match last {
        Some(last) => timed_out(last, wait).with_attempts(attempts),
        None => LockError::new(
            ErrorCode::Timeout,
            format!(
                "waitTimeout of {} ms passed before the nodes answered for lock \"{label}\"",
                wait.as_millis()
            ),
        )
        .with_key(label)
        .with_attempts(attempts),
    }
}

fn timed_out(last: LockError, wait: Duration) -> LockError {
    LockError {
        code: ErrorCode::Timeout,
        message: format!(
            "waitTimeout of {} ms passed: {}",
            wait.as_millis(),
            last.message
        ),
        ..last
    }
}
