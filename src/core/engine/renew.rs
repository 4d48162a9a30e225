//! Keeping a lease: the watchdog's renewal batches (the client's
//! [`Renewer`]) and a manual extend ([`extend`], [`extended`]) share one
//! settle step (the verdict of `ops::extend` at `now` → new deadline, or
//! loss), and a lock whose validity ran out is declared lost here.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use futures_util::stream::{FuturesUnordered, StreamExt};

use crate::core::base::{later, ms_of};
use crate::core::engine::ending;
use crate::core::engine::inner::{Event, Inner};
use crate::core::engine::lock::lost;
use crate::core::engine::lock::{LockState, Status};
use crate::core::engine::watchdog::{Renewer, Watchdog};
use crate::core::error::{LockError, NodeAnswer, Result};
use crate::core::ops;
use crate::core::quorum::{Renewed, Tally};
use crate::core::transport::tokio::Renewal;

const MAX_HOLD_REACHED: &str = "maxHold was reached, so the watchdog let it expire";

impl Renewer for Inner {
    fn watchdog(&self) -> &Watchdog {
        &self.watchdog
    }

    fn expired(self: &Arc<Self>, state: &Arc<LockState>) {
        let label = state.label();
        let now = Instant::now();
        // Renewals stop short of maxHold, so the deadline lands one drift before it.
        let slack = self.cfg.drift_for(state.ttl()) + Duration::from_millis(5);
        let reason = if state
            .hold_until
            .is_some_and(|h| h.saturating_duration_since(now) <= slack)
        {
            MAX_HOLD_REACHED
        } else if state.auto_renew {
            "its validity ran out before a renewal succeeded"
        } else {
            "its validity ran out (it is not renewed automatically)"
        };
        ending::lapse(self, state, lost(&label, reason));
    }

    /// Renews a batch in parts of at most [`RENEW_PART`] locks. One part of
    /// the client is out at a time (batches that come due meanwhile queue
    /// behind, in order), and each part's timeout runs from when it is sent:
    /// a batch of a million locks is not one pipeline that no timeout fits,
    /// nor a thousand pipelines that queue behind one another on the
    /// connection while their timeouts run.
    async fn renew(self: Arc<Self>, batch: Vec<Arc<LockState>>) {
        let mut rest = batch.into_iter();
        loop {
            let part: Vec<Arc<LockState>> = rest.by_ref().take(RENEW_PART).collect();
            if part.is_empty() {
                return;
            }
            let _lane = self.renewing.lock().await;
            self.clone().renew_part(part).await;
        }
    }
}

/// Locks renewed in one round trip per node (a few ms of the server's time).
pub const RENEW_PART: usize = 4_096;

impl Inner {
    /// Renews a batch of locks with one pipelined round trip per node (per hash
    /// slot on a cluster member). On a client whose only node is a cluster,
    /// renewals go side by side and each lock settles on its own reply, so a
    /// master that stalls (e.g. during a failover) holds back only its locks.
    async fn renew_part(self: Arc<Self>, batch: Vec<Arc<LockState>>) {
        let started = Instant::now();
        // A lock whose manual extend is in flight is left to it (the extend
        // reschedules the lock); if that extend fails, the quick retry renews it.
        let mut guards = Vec::with_capacity(batch.len());
        let batch: Vec<Arc<LockState>> = batch
            .into_iter()
            // Ended while its part waited for its turn (released, or lost
            // by its deadline): nothing to renew.
            .filter(|s| s.status() == Status::Held)
            .filter(|s| match s.try_lease_guard() {
                Some(guard) => {
                    guards.push(guard);
                    true
                }
                None => {
                    self.watchdog.done(s, false, started);
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
                settle(&self, state, answers, started, ttls[i], Rearm::Renewal).is_ok()
            } else {
                // A manual extend replaced the lease while this renewal was in flight.
                true
            };
            self.watchdog.done(state, renewed, started);
            renewed
        };
        let mut renewed_count = 0;
        let mut first_fault: Vec<Option<NodeAnswer>> = vec![None; self.nodes.len()];
        let only_cluster = match self.nodes.as_slice() {
            [node] if node.is_cluster() => Some(node),
            _ => None,
        };
        if let Some(node) = only_cluster {
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
            // Each lock settles as soon as its answers decide it (a quorum
            // renewed it, or enough nodes no longer hold it, or every node is
            // in), so a node that stalls until `timeout` delays no lock whose
            // quorum answered: its validity is counted to the quorum's reply.
            // The lease guards stay held until every node answered, so no
            // renewal of a lock is ever in flight beside another of its PEXPIREs.
            let mut out: FuturesUnordered<_> = self
                .nodes
                .iter()
                .enumerate()
                .map(|(j, n)| {
                    let renewals = &renewals;
                    async move { (j, n.extend_batch(renewals, timeout).await) }
                })
                .collect();
            let mut columns = vec![vec![NodeAnswer::Pending; self.nodes.len()]; batch.len()];
            let mut settled = vec![false; batch.len()];
            while let Some((j, answers)) = out.next().await {
                for (column, answer) in columns.iter_mut().zip(answers) {
                    if answer.is_fault() && first_fault[j].is_none() {
                        first_fault[j] = Some(answer.clone());
                    }
                    column[j] = answer;
                }
                let all_in = out.is_empty();
                for (i, answers) in columns.iter().enumerate() {
                    if settled[i] || !(all_in || decided(&Tally::of(answers))) {
                        continue;
                    }
                    settled[i] = true;
                    renewed_count += usize::from(settle(i, answers));
                }
            }
        }
        // One event per failing node per batch, not one per lock.
        for (node, fault) in first_fault.iter().enumerate() {
            if let Some(a) = fault {
                self.report_fault(node, a);
            }
        }
        if renewed_count > 0 {
            self.emit(Event::Renewed {
                count: renewed_count,
            });
        }
        self.watchdog.nudge();
    }
}

/// A renewal's answers so far settle its lock: a quorum renewed it, or so
/// many nodes no longer hold it that no answer still out could save it.
fn decided(t: &Tally) -> bool {
    t.agreed() || t.lost()
}

/// Which kind of re-arming a lease is being settled.
#[derive(Clone, Copy)]
enum Rearm {
    Renewal,
    Extension,
}

/// Applies one renewal's or extension's answers to a lock (`started`: when
/// it was sent; `ttl`: the lease it asked for). `Ok` when the lock was
/// renewed; the error says why not, and the lock is lost when it is.
fn settle(
    inner: &Arc<Inner>,
    state: &Arc<LockState>,
    answers: &[NodeAnswer],
    started: Instant,
    ttl: Duration,
    lease: Rearm,
) -> Result<()> {
    let label = state.label();
    if state.status() != Status::Held {
        return Err(state
            .loss()
            .unwrap_or_else(|| lost(&label, "it was released")));
    }
    let t = Tally::of(answers);
    let drift = inner.cfg.drift_for(ttl);
    let (verdict, deadline) = ops::extend::verdict(answers, started, ttl, drift, Instant::now());
    match verdict {
        Renewed::Renewed => {
            // Each PEXPIRE replaces the key's TTL, so the new deadline replaces the old one.
            state.set_deadline(deadline);
            inner.stats.renewed.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        Renewed::TooLate => {
            // The keys now carry the new TTL whatever we do: the deadline follows them.
            state.set_deadline(deadline);
            // A lease cut short to end at maxHold leaves little validity: that is the hold ending.
            let at_max_hold = state.hold_until.is_some_and(|h| later(started, ttl) >= h);
            let why = lost(
                &label,
                match lease {
                    _ if at_max_hold => MAX_HOLD_REACHED,
                    Rearm::Renewal => "its renewal was answered too late to leave any validity",
                    Rearm::Extension => "the extension was answered too late to leave any validity",
                },
            );
            ending::lose(inner, state, why.clone());
            Err(why)
        }
        Renewed::Lost => {
            let why = lost(
                &label,
                "its key was deleted or now holds another owner's token",
            )
            .with_nodes(inner.reports(answers));
            ending::lose(inner, state, why.clone());
            Err(why)
        }
        Renewed::NoQuorum => Err(inner
            .no_quorum(answers, || {
                format!(
                    "extend of \"{label}\": {} of {} nodes agreed, {} needed",
                    t.ok,
                    t.nodes,
                    t.needed()
                )
            })
            .with_key(label.clone())),
    }
}

/// Extends `state`'s lease to `ttl` from now (same token) and makes `ttl`
/// the lease the watchdog keeps renewing. Never recreates a missing key.
pub async fn extend(inner: &Arc<Inner>, state: &Arc<LockState>, ttl: Duration) -> Result<()> {
    extendable(inner, state, ttl)?;
    // One PEXPIRE of this lock in flight at a time (see `LockState::lease_guard`).
    let _lease = state.lease_guard().await;
    if state.status() != Status::Held {
        return Err(state
            .loss()
            .unwrap_or_else(|| lost(&state.label(), "it was released")));
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
            state.answers.start(std::slice::from_ref(&answer));
            vec![answer]
        }
        _ => {
            crate::core::engine::at_quorum::extend_until_decided(
                inner,
                &renewal[0],
                timeout,
                state.clone(),
            )
            .await
        }
    };
    extended(inner, state, &answers, started, ttl)
}

/// Whether `state` may be extended to `ttl` now (either driver asks before
/// sending): the client is open, the lock held, and `ttl` longer than its
/// clock-drift allowance; the error says why not.
pub(crate) fn extendable(inner: &Inner, state: &LockState, ttl: Duration) -> Result<()> {
    inner.ensure_open()?;
    let label = || state.label();
    match state.status() {
        Status::Held => {}
        Status::Released => return Err(lost(&label(), "it was already released")),
        Status::HandedOver => return Err(lost(&label(), "it was handed over")),
        Status::Lost => {
            return Err(state
                .loss()
                .unwrap_or_else(|| lost(&label(), "it was lost")))
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
    Ok(())
}

/// What a manual extension's answers (decided at quorum) mean: the new
/// lease becomes the one renewals keep.
pub(crate) fn extended(
    inner: &Arc<Inner>,
    state: &Arc<LockState>,
    answers: &[NodeAnswer],
    started: Instant,
    ttl: Duration,
) -> Result<()> {
    inner.report_faults(answers);
    if matches!(state.status(), Status::Released | Status::HandedOver) {
        // Sent before the caller released the lock (one connection keeps the
        // order): the nodes ran it first, so it stands as they answered it,
        // and the lock stays released.
        let drift = inner.cfg.drift_for(ttl);
        let (verdict, _) = ops::extend::verdict(answers, started, ttl, drift, Instant::now());
        return match verdict {
            Renewed::Renewed => Ok(()),
            _ => Err(lost(&state.label(), "it was released")),
        };
    }
    settle(inner, state, answers, started, ttl, Rearm::Extension)?;
    let every = state
        .renew_every()
        .min(ttl / 3)
        .max(Duration::from_millis(1));
    state.set_ttl(ttl, every);
    inner.watchdog.reschedule(state);
    Ok(())
}
