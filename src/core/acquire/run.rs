//! The acquire loop: attempt on every node → verdict → take the lock, or undo
//! the attempt and pause (woken early by the holder's release notice), until
//! the lock is won, the wait ends, or the caller cancels. The caller's bounds
//! (`waitTimeout`, cancellation) hold while an attempt is in flight too; the
//! undo of an attempt the caller no longer waits for goes on in the background.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use tokio_util::sync::CancellationToken;

use super::attempt::attempt_for;
use super::fair::LinePlace;
use super::queue::{queue_up, Queued};
use super::undo::Undo;
use crate::core::broken;
use crate::core::error::{LockError, Result};
use crate::core::keys;
use crate::core::lock::Lock;
use crate::core::model::{self, LockKind, Request, Won};
use crate::core::ops::acquisition::decide::{self, Bounds, Next};
use crate::core::ops::acquisition::failure::{
    aborted, attempt_failed, behind_earlier, timed_out, wait_passed,
};
use crate::core::quorum::{self, Acquired, Tally};
use crate::core::shared::Inner;
use crate::core::time::ms_of;

/// Takes the lock (permits, slot, fair place) `request` asks for.
pub(super) async fn acquire_from(
    inner: &Arc<Inner>,
    request: Request,
    cancel: CancellationToken,
) -> Result<Lock> {
    let Request {
        names,
        spec,
        permits,
        arrival,
    } = request;
    inner.ensure_open()?;
    let keys = keys::prefixed(&inner.cfg.key_prefix, &names);
    let script_keys = keys::script_keys(&keys, inner.cfg.fencing);
    let key_label = names.join(", ");
    let began = Instant::now();
    let wait_until = began + spec.wait_timeout;
    let drift = inner.cfg.drift_for(spec.ttl);
    let n = inner.nodes.len();
    let kind = LockKind::of(permits);
    let mut token = model::token(permits);
    let mut attempts: u32 = 0;
    // Waiting for one key: queue up for its release notices from the plain
    // masters (cluster members send none; their waiters keep the retry timer).
    let notices = keys.len() == 1 && inner.nodes.iter().any(|n| !n.is_cluster());
    let mut queued: Option<Queued> = None;
    let undo_timeout = inner.cfg.node_timeout_for(spec.ttl);
    // A fair waiter that stops waiting leaves the line at once.
    let mut line = LinePlace::of(inner, permits, &keys[0], &token, &spec, undo_timeout);
    let every_node: Vec<usize> = (0..n).collect();
    // waitTimeout 0 asks for one attempt with no waiting: that attempt keeps
    // its own bound (the node timeout).
    let wait_bounds_attempts = !spec.wait_timeout.is_zero();
    let bounds = Bounds::of(&spec, wait_until);
    let mut last_failure: Option<LockError> = None;
    if let Some(arrival) = &arrival {
        // Earlier callers of this client for the key go first.
        tokio::select! {
            _ = arrival.turn() => {}
            _ = cancel.cancelled() => return Err(aborted(&key_label, 0)),
            _ = tokio::time::sleep_until(wait_until.into()), if wait_bounds_attempts => {
                return Err(behind_earlier(&key_label, spec.wait_timeout));
            }
        }
        inner.ensure_open()?;
        // Earlier callers of this client already wait for the key: wait in
        // line behind them instead of trying at once (a try that lands just
        // after a release would overtake them).
        let waits = notices && spec.retry_count != Some(0) && wait_bounds_attempts;
        if waits && inner.waiters.waiting_before(&keys[0], arrival.seq()) {
            let jitter = rand::rng().random_range(0..=ms_of(spec.retry_jitter));
            let pause = (spec.retry_delay + Duration::from_millis(jitter))
                .min(wait_until.saturating_duration_since(Instant::now()));
            let q = tokio::select! {
                q = queue_up(inner, &keys[0], &token, Some(arrival), pause) => q,
                _ = cancel.cancelled() => return Err(aborted(&key_label, 0)),
                _ = inner.closing.cancelled() => return Err(LockError::closed()),
            };
            let q = queued.insert(q);
            // Once notices are heard, a release wakes the line: the timer is
            // only a bound for a holder that vanished, as for the first in line.
            let pause = if q.heard() && spec.retry_count.is_none() {
                (spec.ttl + Duration::from_millis(jitter))
                    .min(wait_until.saturating_duration_since(Instant::now()))
            } else {
                pause
            };
            if !pause_in_line(
                inner,
                &keys[0],
                Some(q),
                spec.retry_count.is_none(),
                pause,
                wait_until,
                &cancel,
            )
            .await
            {
                return Err(aborted(&key_label, 0));
            }
            if Instant::now() >= wait_until {
                return Err(behind_earlier(&key_label, spec.wait_timeout));
            }
            inner.ensure_open()?;
        }
    }
    loop {
        if cancel.is_cancelled() {
            return Err(aborted(&key_label, attempts));
        }
        attempts += 1;
        if attempts > 1 && n > 1 {
            // Redlock: a fresh value per attempt. One node keeps its token, so an
            // earlier attempt that landed without a reply still counts as ours.
            token = model::token(permits);
        }
        // A release after this attempt reads the key will wake us.
        let heard = queued.as_ref().is_some_and(Queued::heard);
        let attempt = tokio::select! {
            attempt = attempt_for(inner, permits, &script_keys, keys.len(), &token, &spec) => attempt,
            _ = cancel.cancelled() => {
                inner.undo_in_background(keys, token, kind, every_node, undo_timeout);
                return Err(aborted(&key_label, attempts));
            }
            _ = tokio::time::sleep_until(wait_until.into()), if wait_bounds_attempts => {
                inner.undo_in_background(keys, token, kind, every_node, undo_timeout);
                return Err(wait_passed(last_failure, &key_label, attempts, spec.wait_timeout));
            }
        };
        let started = broken::validity_start(attempt.started);
        let answers = &attempt.answers;
        inner.report_faults(answers);
        let t = Tally::of(answers);
        let elapsed = started.elapsed();
        let validity = quorum::validity(spec.ttl, elapsed, drift);
        let verdict = quorum::acquired(&t, validity, spec.min_validity);
        if verdict == Acquired::Won && !cancel.is_cancelled() && inner.ensure_open().is_ok() {
            let lock = inner.register(Won {
                keys,
                token,
                kind,
                attempts,
                started,
                spec: &spec,
                attempt: &attempt,
            });
            if let Some(line) = line.as_mut() {
                line.taken();
            }
            return inner.unless_closed(lock);
        }
        if t.held > 0 {
            inner.stats.contended.fetch_add(1, Ordering::Relaxed);
        }
        let mut to_undo = Undo::of(&attempt);
        if let Err(closed) = inner.ensure_open() {
            to_undo.in_background(inner, keys, token, kind, undo_timeout);
            return Err(closed);
        }
        if cancel.is_cancelled() {
            to_undo.in_background(inner, keys, token, kind, undo_timeout);
            return Err(aborted(&key_label, attempts));
        }
        let failure = attempt_failed(
            verdict,
            inner.reports(answers),
            &key_label,
            attempts,
            elapsed,
            spec.ttl,
        );
        let contended = matches!(verdict, Acquired::Contended { .. });
        let worth_retrying = quorum::worth_retrying(answers);
        match decide::next(verdict, worth_retrying, attempts, &bounds, Instant::now()) {
            Next::Retry => {}
            Next::GiveUp => {
                to_undo.in_background(inner, keys, token, kind, undo_timeout);
                return Err(failure);
            }
            Next::TimedOut => {
                to_undo.in_background(inner, keys, token, kind, undo_timeout);
                return Err(timed_out(failure, spec.wait_timeout));
            }
        }
        // Retrying: the undo lands before the next attempt (one node keeps its
        // token, so a late undo could delete the next attempt's key).
        let cut_short = tokio::select! {
            _ = to_undo.land(inner, &keys, &token, kind, undo_timeout) => None,
            _ = cancel.cancelled() => Some(true),
            _ = tokio::time::sleep_until(wait_until.into()) => Some(false),
        };
        if let Some(cancelled) = cut_short {
            to_undo.in_background(inner, keys, token, kind, undo_timeout);
            return Err(if cancelled {
                aborted(&key_label, attempts)
            } else {
                timed_out(failure, spec.wait_timeout)
            });
        }
        let now = Instant::now();
        let jitter_ms = ms_of(spec.retry_jitter);
        let jitter = Duration::from_millis(rand::rng().random_range(0..=jitter_ms));
        let Some(mut pause) = decide::pause(t.longest_pttl, heard, jitter, &bounds, now) else {
            return Err(timed_out(failure, spec.wait_timeout));
        };
        last_failure = Some(failure);
        if queued.is_none() && notices && contended {
            // (A release before the subscription is in place goes unheard:
            // the retry timer covers it, as it covers a lost notice.)
            queued = Some(tokio::select! {
                q = queue_up(inner, &keys[0], &token, arrival.as_ref(), pause) => q,
                _ = cancel.cancelled() => return Err(aborted(&key_label, attempts)),
                _ = inner.closing.cancelled() => return Err(LockError::closed()),
            });
            let spent = now.elapsed();
            if spent >= pause {
                continue;
            }
            pause -= spent;
        }
        // An attempt that did not queue up for notices (no notices, or an
        // outage rather than a holder) lets the next caller of the key go.
        if let Some(arrival) = arrival.as_ref().filter(|_| !notices || !contended) {
            arrival.answered();
        }
        // With a retryCount every pause is bounded by retryDelay + jitter: its
        // timer makes this caller's own next attempt, never the first's.
        let in_line = arrival.is_some() && spec.retry_count.is_none();
        if !pause_in_line(
            inner,
            &keys[0],
            queued.as_ref(),
            in_line,
            pause,
            wait_until,
            &cancel,
        )
        .await
        {
            inner.ensure_open()?;
            return Err(aborted(&key_label, attempts));
        }
        if Instant::now() >= wait_until {
            // The pause ran to the end of the wait: no attempt is left to make.
            if let Some(last) = last_failure.take() {
                return Err(timed_out(last, spec.wait_timeout));
            }
        }
    }
}

/// Sleeps `pause`, or less when a release notice wakes `queued`. A plain
/// lock's waiter (`in_line`) whose timer fires behind the first in line
/// wakes the first instead and sleeps on, so that a lost notice costs
/// the line a timer, never its order. False when cancelled or the client closes.
async fn pause_in_line(
    inner: &Inner,
    key: &str,
    queued: Option<&Queued>,
    in_line: bool,
    mut pause: Duration,
    wait_until: Instant,
    cancel: &CancellationToken,
) -> bool {
    loop {
        let woken = async {
            match queued {
                Some(q) => q.place.woken().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = woken => {
                inner.stats.woken.fetch_add(1, Ordering::Relaxed);
                break;
            }
            _ = cancel.cancelled() => return false,
            _ = inner.closing.cancelled() => return false,
        }
        let behind =
            in_line && queued.is_some_and(|q| inner.waiters.wake_first_instead(key, &q.place));
        pause = pause.min(wait_until.saturating_duration_since(Instant::now()));
        if !behind || pause.is_zero() {
            break;
        }
    }
    if let Some(q) = queued {
        // Trying now anyway: a notice that came meanwhile is spent.
        q.place.consume();
    }
    true
}
