//! How a held lock ends: let go by its caller and released at quorum,
//! handed over, extended at quorum, lost (renewals refused) or lapsed (its
//! validity ran out), with what is still its own freed on the nodes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::core::base::later;
use crate::core::broken;
use crate::core::engine::inner::{Event, Inner};
use crate::core::engine::lock_state::{LockState, Release};
use crate::core::error::{LockError, NodeAnswer, Result};
use crate::core::model::LockKind;
use crate::core::ops::gather::Gather;
use crate::core::ops::SharedAnswers;
use crate::core::quorum::{self, Released, Tally};
use crate::core::transport::tokio::collect::{Call, Collect};
use crate::core::transport::tokio::Renewal;

/// Ends `state` as released in this process, before anything is sent: the
/// watchdog stops renewing it and it no longer counts as held. False when
/// it had already ended (released, lost, handed over or dropped).
pub(crate) fn let_go(inner: &Inner, state: &LockState) -> bool {
    stop_holding(inner, state, state.end_released())
}

/// Ends `state` as handed over: as [`let_go`], and nothing is
/// sent, now or later.
pub(crate) fn hand_over(inner: &Inner, state: &LockState) -> bool {
    stop_holding(inner, state, state.end_handed_over())
}

fn stop_holding(inner: &Inner, state: &LockState, ended: bool) -> bool {
    if !ended {
        return false;
    }
    inner.watchdog.unwatch(state);
    inner.stats.held.fetch_sub(1, Ordering::Relaxed);
    true
}

/// The verdict of a caller's release (after [`let_go`]), counted;
/// either driver gathers the answers. Keys gone or another owner's mean
/// the lock was lost before the release: it is recorded as lost, and the
/// caller reports the loss it is given.
///
/// `heard`: how many clients the release's notice reached, when the driver
/// read it (see [`ops::release::heard`](crate::core::ops::release::heard)).
/// When nobody but this client listens, its waiters for the keys hear of
/// the release now, in the release's own reply handling, rather than once
/// the notice comes back on its subscriber's connection (which then wakes
/// nobody twice: the same token's notice is heard once). When other
/// clients listen too, every waiter hears by the notice alike, so that a
/// releasing process's waiters get no head start over the others'.
pub(crate) fn released_by_caller(
    inner: &Inner,
    state: &LockState,
    answers: &[NodeAnswer],
    heard: Option<i64>,
) -> Result<Release> {
    if release_verdict(inner, state, answers)? {
        inner.stats.released.fetch_add(1, Ordering::Relaxed);
        if let (LockKind::Key, Some(heard)) = (state.kind, heard) {
            // This client's own subscription is one of those the notice
            // reached; without a waiter here there is nobody to wake.
            if heard <= 1 && state.keys.iter().any(|k| inner.waiters.waiting(k)) {
                for key in state.keys.iter() {
                    inner.waiters.released(key, state.token.as_str());
                }
            }
        }
        return Ok(Release::Released);
    }
    match state.lost_before_release() {
        Some(loss) => {
            inner.stats.lost.fetch_add(1, Ordering::Relaxed);
            Ok(Release::Lost(loss))
        }
        None => Ok(Release::NotHeld),
    }
}

/// Sends a token-checked release everywhere; the lock has already ended locally.
/// Resolves once a quorum deleted our keys: on a minority of nodes the
/// release may still be on its way (a background task `close()` awaits).
pub async fn release_state(inner: &Arc<Inner>, state: &Arc<LockState>) -> Result<bool> {
    let answers = release_until_decided(inner, state, None).await;
    release_verdict(inner, state, &answers)
}

/// Token-checked release of a lock's keys on every node, answered once a
/// quorum deleted them (or, failing that, once every node answered).
/// With `longest`, only keys whose lease has no more than that left go
/// (the cleanup of a lock that lapsed).
pub(crate) async fn release_until_decided(
    inner: &Arc<Inner>,
    state: &Arc<LockState>,
    longest: Option<Duration>,
) -> Vec<NodeAnswer> {
    let longest_ms = longest.map(crate::core::base::ms_of);
    let timeout = inner.cfg.command_timeout;
    let keys: Arc<[String]> = Arc::from(&state.keys[..]);
    let token: Arc<str> = state.token.as_str().into();
    let kind = state.kind;
    let calls = (0..inner.nodes.len())
        .map(|i| -> Call<()> {
            let (inner, keys, token) = (inner.clone(), keys.clone(), token.clone());
            Box::pin(async move {
                let answer = inner.nodes[i]
                    .release(&keys, &token, kind, longest_ms, timeout)
                    .await;
                (answer, ())
            })
        })
        .collect();
    let mut collect = Collect::new(calls, Some(state.clone()));
    let answers = collect.until(Gather::at_quorum).await;
    inner.finish_in_background(collect);
    answers
}

/// One lock's extension on every node, answered once a quorum re-armed
/// its keys (or, failing that, once every node answered).
pub(crate) async fn extend_until_decided(
    inner: &Arc<Inner>,
    renewal: &Renewal<'_>,
    timeout: Duration,
    record: SharedAnswers,
) -> Vec<NodeAnswer> {
    let keys: Arc<[String]> = renewal.keys.into();
    let token: Arc<str> = renewal.token.into();
    let ttl_ms = renewal.ttl_ms;
    let calls = (0..inner.nodes.len())
        .map(|i| -> Call<()> {
            let (inner, keys, token) = (inner.clone(), keys.clone(), token.clone());
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
    let mut collect = Collect::new(calls, Some(record));
    let answers = collect.until(Gather::at_quorum).await;
    inner.finish_in_background(collect);
    answers
}

/// What a release's answers (decided at quorum) mean for its caller.
pub(crate) fn release_verdict(
    inner: &Inner,
    state: &LockState,
    answers: &[NodeAnswer],
) -> Result<bool> {
    inner.report_faults(answers);
    match quorum::released(&Tally::of(answers)) {
        Released::Released => Ok(true),
        Released::NotOurs => Ok(false),
        Released::NoQuorum => {
            let label = state.label();
            let err = inner.no_quorum(answers, || {
                format!("release of \"{label}\" reached too few nodes")
            });
            let message = format!("{}; the lock expires by its TTL", err.message);
            Err(LockError { message, ..err }.with_key(label))
        }
    }
}

/// Ends a held lock as lost: notifies once, then releases it everywhere
/// (token-checked, so only what is still ours goes).
pub fn lose(inner: &Arc<Inner>, state: &Arc<LockState>, why: LockError) {
    end_lost(inner, state, why, Cleanup::Release);
}

/// Ends a held lock whose validity ran out as lost, then frees what is
/// still its own at once rather than at its TTL (renewals whose replies
/// were lost may have landed): a token-checked release of each key whose
/// lease is no longer than this lock's `ttl`, the longest its own
/// renewals set (a fair lock's key goes to the next waiter in line). A
/// key continued with a longer lease by a client that adopted the token
/// is left to it.
pub fn lapse(inner: &Arc<Inner>, state: &Arc<LockState>, why: LockError) {
    let cleanup = if broken::cleans_up_lapsed() {
        // Broken on purpose, plain-del: a naive lock cleans up whatever happened.
        Cleanup::Release
    } else {
        Cleanup::Within(state.ttl())
    };
    end_lost(inner, state, why, cleanup);
}

fn end_lost(inner: &Arc<Inner>, state: &Arc<LockState>, why: LockError, cleanup: Cleanup) {
    if broken::swallows_losses() {
        // Broken on purpose: keep believing in the lock and keep renewing.
        state.set_deadline(later(Instant::now(), state.ttl()));
        inner.watchdog.watch(state.clone());
        return;
    }
    if !state.end_lost(why.clone()) {
        return;
    }
    inner.watchdog.unwatch(state);
    inner.stats.lost.fetch_add(1, Ordering::Relaxed);
    inner.stats.held.fetch_sub(1, Ordering::Relaxed);
    inner.emit(Event::Lost {
        id: state.id,
        error: &why,
    });
    state.notify_ended();
    let longest = match cleanup {
        Cleanup::Release => None,
        Cleanup::Within(ttl) => Some(ttl),
    };
    let owned = inner.clone();
    let state = state.clone();
    inner.in_background(async move {
        let answers = release_until_decided(&owned, &state, longest).await;
        let _ = release_verdict(&owned, &state, &answers);
    });
}

/// What follows a loss on the nodes.
enum Cleanup {
    /// A token-checked release.
    Release,
    /// A token-checked release of the keys with no more than this left.
    Within(Duration),
}
