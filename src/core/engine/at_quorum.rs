//! A held lock's release and extension sent to every node and decided at
//! quorum, and what a release's answers mean for its caller.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::core::engine::inner::Inner;
use crate::core::engine::lock::{LockState, Release};
use crate::core::error::{LockError, NodeAnswer, Result};
use crate::core::model::LockKind;
use crate::core::ops::gather::Gather;
use crate::core::ops::SharedAnswers;
use crate::core::quorum::{self, Released, Tally};
use crate::core::transport::tokio::collect::{Call, Collect};
use crate::core::transport::tokio::Renewal;

/// The verdict of a caller's release (after [`let_go`](super::ending::let_go)), counted;
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
