//! Fair acquisitions: waiters in every process are served in arrival order
//! through a line kept in Redis beside the key (`{key}:line`, places by
//! arrival, and `{key}:line:lease`, each place's lease end). A waiter renews
//! its place at each attempt, so a crashed one's place expires; one that stops
//! waiting (aborted, timed out) leaves the line at once. Locks take the key
//! only at the head of the line; a semaphore's or read-write lock's permits
//! are taken only when they fit beside those of every earlier waiter.
//!
//! With fencing, a fair lock's fence counter goes up wherever the key changes
//! hands: an attempt that takes it increments it, and so does a release that
//! hands it to a waiter whose place asks for a fence; the new holder learns
//! the value from the attempt's reply or the hand-off notice (or, where no
//! notice reaches it, from its next attempt, which finds the key already
//! holding its token and reads the counter as it stands). Permits take no
//! fence.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use crate::core::config::AcquireSpec;
use crate::core::error::NodeAnswer;
use crate::core::keys;
use crate::core::model::{line_keys, Attempt, FairLease, Kind, Permits};
use crate::core::quorum;
use crate::core::shared::Inner;
use crate::core::time::ms_of;

/// How long a waiter's place lasts unless its next attempt renews it: a waiter
/// pauses at most retryDelay + retryJitter between attempts, and the floor
/// rides out a process that is not scheduled for a while (a loaded machine, a
/// GC pause). A single attempt takes no place.
fn place_ms(spec: &AcquireSpec) -> u64 {
    if spec.retry_count == Some(0) || spec.wait_timeout.is_zero() {
        return 0;
    }
    ms_of(spec.retry_delay + spec.retry_jitter)
        .saturating_mul(4)
        .max(2_000)
}

/// One fair attempt on every node (one node, or a cluster). A lock that a
/// release already handed to this waiter needs no attempt at all; a lock's
/// attempt with fencing carries the highest fence granted.
pub(super) async fn attempt_fair(
    inner: &Inner,
    p: Permits,
    key: &str,
    token: &str,
    spec: &AcquireSpec,
) -> Attempt {
    if p.kind == Kind::Fair {
        if let Some(handed) = handed_over(inner, key, token, spec) {
            return handed;
        }
    }
    let line = line_keys(key);
    let fence = (p.kind == Kind::Fair && inner.cfg.fencing).then(|| keys::fence_key(key));
    let place_ms = place_ms(spec);
    // Numbered while in line (the waiter's LinePlace forgets the count).
    let attempt = if p.kind == Kind::Fair && place_ms > 0 {
        inner.waiters.next_attempt(token)
    } else {
        0
    };
    let lease = FairLease {
        key,
        line: &line,
        token,
        ttl_ms: ms_of(spec.ttl),
        place_ms,
        attempt,
        fence: fence.as_deref(),
    };
    let timeout = inner.cfg.node_timeout_for(spec.ttl);
    let cons = join_all(inner.nodes.iter().map(|n| n.connection())).await;
    let sent = cons.iter().map(Result::is_ok).collect();
    let started = Instant::now();
    let lease = &lease;
    let replies = join_all(inner.nodes.iter().zip(cons).map(|(node, con)| async move {
        match con {
            Ok(mut con) if p.kind == Kind::Fair => {
                node.acquire_fair(&mut con, lease, timeout).await
            }
            Ok(mut con) => (
                node.acquire_fair_permits(&mut con, lease, p.limit, timeout)
                    .await,
                0,
            ),
            Err(answer) => (answer, 0),
        }
    }))
    .await;
    let (answers, fences): (Vec<NodeAnswer>, Vec<i64>) = replies.into_iter().unzip();
    if attempt > 0 && matches!(answers.as_slice(), [NodeAnswer::Held { .. }]) {
        // Any hand-off to this waiter comes after this attempt was sent.
        inner.waiters.still_waiting(token, attempt, started);
    }
    let mut attempt = Attempt::answered(answers, started, sent);
    attempt.fence = fences.into_iter().max().unwrap_or(0);
    attempt
}

/// The lock a release handed to this waiter, as an attempt that won: its
/// validity counts from the attempt the hand-off came after (it was sent
/// before the key was set), its fence is the one the notice carried. `None`
/// when no hand-off came, when it is stale (a later attempt found us
/// waiting), when that attempt is too long ago to leave half the TTL, or
/// when fencing is on and the notice carried no fence (then a real attempt
/// re-arms the key, which holds our token if the hand-off still stands, and
/// reads the fence).
fn handed_over(inner: &Inner, key: &str, token: &str, spec: &AcquireSpec) -> Option<Attempt> {
    if inner.nodes.len() != 1 {
        return None;
    }
    let handed = inner.waiters.handed_over(key, token)?;
    let fence = match (inner.cfg.fencing, handed.fence) {
        (true, None) => return None,
        (true, Some(fence)) => fence,
        (false, _) => 0,
    };
    let since = handed.since;
    let validity = quorum::validity(spec.ttl, since.elapsed(), inner.cfg.drift_for(spec.ttl));
    if validity < spec.min_validity.max(spec.ttl / 2) {
        return None;
    }
    let mut attempt = Attempt::answered(vec![NodeAnswer::Ok], since, vec![true]);
    attempt.fence = fence;
    Some(attempt)
}

/// A fair waiter's place in the line: unless the acquisition won, dropping it
/// takes the place out of the line (in the background, after any attempt
/// still in flight on the same connection).
pub(super) struct LinePlace {
    inner: Arc<Inner>,
    /// A lock's line (else a semaphore's or read-write lock's).
    lock: bool,
    key: String,
    line: [String; 2],
    token: String,
    timeout: Duration,
    left: bool,
}

impl LinePlace {
    /// A place for a fair acquisition of `key` (`None` for any other).
    pub(super) fn of(
        inner: &Arc<Inner>,
        permits: Option<Permits>,
        key: &str,
        token: &str,
        spec: &AcquireSpec,
        timeout: Duration,
    ) -> Option<LinePlace> {
        permits
            .filter(|p| p.kind.is_fair() && place_ms(spec) > 0)
            .map(|p| LinePlace {
                inner: inner.clone(),
                lock: p.kind == Kind::Fair,
                key: key.to_string(),
                line: line_keys(key),
                token: token.to_string(),
                timeout,
                left: false,
            })
    }

    /// The acquisition won: its attempt (or the hand-off) already took the
    /// place out of the line.
    pub(super) fn taken(&mut self) {
        self.left = true;
        self.inner.waiters.done_waiting(&self.token);
    }
}

impl Drop for LinePlace {
    fn drop(&mut self) {
        if self.left {
            return;
        }
        self.inner.waiters.done_waiting(&self.token);
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let inner = self.inner.clone();
        let (lock, key) = (self.lock, std::mem::take(&mut self.key));
        let line = std::mem::take(&mut self.line);
        let token = std::mem::take(&mut self.token);
        let timeout = self.timeout;
        self.inner.in_background(async move {
            join_all(inner.nodes.iter().map(|n| async {
                if lock {
                    // A lock handed over meanwhile is released (handed on).
                    n.release_fair(&key, &token, true, timeout).await;
                } else {
                    n.leave_line(&line, &token, timeout).await;
                }
            }))
            .await;
        });
    }
}
