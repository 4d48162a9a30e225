//! Waiting in a key's line: the first waiter of a client subscribes to the
//! key's release notices on every node; leaving the line (on drop) ends the
//! subscription once nobody else waits. And what both drivers do there
//! around the acquisition machine: join behind earlier callers ([`join`],
//! [`queue_up`]), wake the first in line instead when a timer fires behind
//! it ([`timer_fired`]), hand it a notice or a fair hand-off ([`woke`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::core::base::ms_of;
use crate::core::config::AcquireSpec;
use crate::core::engine::acquire::Request;
use crate::core::engine::inner::Inner;
use crate::core::engine::waiters::{Arrival, Place};
use crate::core::model::keys::channel;
use crate::core::ops::acquisition::{Acquisition, Handoff, Take};
use crate::core::transport::tokio::NoticeSink;

/// Joins the queue for `key` as the waiter holding `token`, by its place
/// in call order (its `arrival`, else behind everyone); the first
/// local waiter subscribes to its release notices on every node, waiting
/// for that at most `timeout`.
pub(crate) async fn queue_up(
    inner: &Arc<Inner>,
    key: &str,
    token: &str,
    arrival: Option<&Arrival>,
    timeout: Duration,
) -> Queued {
    let (queued, subscribing) = join(inner, key, token, arrival, Handle::current());
    if let Some(subscribing) = subscribing {
        let _ = tokio::time::timeout(timeout, subscribing).await;
    }
    queued
}

/// Joins the queue for `key` at once (see [`queue_up`]); the subscription of
/// the first local waiter runs on `runtime`, and its task is returned (it
/// marks the queue [`Queued::heard`] once every node delivers).
pub(crate) fn join(
    inner: &Arc<Inner>,
    key: &str,
    token: &str,
    arrival: Option<&Arrival>,
    runtime: Handle,
) -> (Queued, Option<JoinHandle<()>>) {
    let joined = inner
        .waiters
        .join_in_turn(key, token, arrival.map(Arrival::seq));
    if let Some(arrival) = arrival {
        // Queued: the next caller of this client may try now (it queues behind).
        arrival.answered();
    }
    let heard = joined.heard.clone();
    let queued = Queued {
        inner: inner.clone(),
        key: key.to_string(),
        place: joined.place,
        heard: joined.heard,
        runtime: runtime.clone(),
    };
    if !joined.first {
        return (queued, None);
    }
    // The subscription runs on its own, so a node slow to answer delays
    // this waiter no longer than it would have slept anyway; a node that
    // cannot push leaves its waiters to their retry timers.
    let inner = inner.clone();
    let channel = channel(key);
    let subscribing = runtime.spawn(async move {
        let limit = inner.cfg.connect_timeout.max(inner.cfg.command_timeout);
        let waiters = Arc::downgrade(&inner.waiters);
        let sink: NoticeSink = Arc::new(move |channel: &[u8], message: &[u8]| {
            if let Some(w) = waiters.upgrade() {
                w.on_message(channel, message);
            }
        });
        let live = join_all(
            inner
                .nodes
                .iter()
                .map(|n| n.subscribe(&channel, &sink, limit)),
        )
        .await;
        // Waiters may now sleep until the holder's lease ends: its
        // release, on any node, wakes them first.
        if live.iter().all(|&l| l) {
            heard.store(true, Ordering::Release);
        }
    });
    (queued, Some(subscribing))
}

/// Ends the subscription to `key`'s release notices unless a waiter came back.
async fn unsubscribe(inner: &Inner, key: &str) {
    let channel = channel(key);
    let timeout = inner.cfg.command_timeout;
    join_all(
        inner
            .nodes
            .iter()
            .map(|n| n.unsubscribe(&channel, || inner.waiters.waiting(key), timeout)),
    )
    .await;
}

/// A caller's place in the queue for a key; leaving it (on drop) ends the
/// key's subscription once nobody else waits for it.
pub(crate) struct Queued {
    inner: Arc<Inner>,
    key: String,
    pub(crate) place: Arc<Place>,
    heard: Arc<AtomicBool>,
    /// Where the unsubscription runs (the waiter may leave on the JS thread).
    runtime: Handle,
}

impl Queued {
    /// Every node delivers this key's release notices: a release is heard.
    pub(crate) fn heard(&self) -> bool {
        self.heard.load(Ordering::Acquire)
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        if !self.inner.waiters.leave(&self.key, &self.place) {
            return;
        }
        let inner = self.inner.clone();
        let key = std::mem::take(&mut self.key);
        self.runtime
            .spawn(async move { unsubscribe(&inner, &key).await });
    }
}

/// The machine's timer, set for `at`, fired at `now`: when it waits in
/// line behind an earlier caller of its client, that one is woken instead
/// and it waits as long again; otherwise what came due happens. A pause
/// its timer ended spends a notice that came meanwhile (the attempt it
/// makes now is the one the notice asked for); a notice that comes later
/// stays pending: it ends the next pause, or goes to the next in line
/// (a semaphore's release wakes one waiter per permit).
pub(crate) fn timer_fired(
    inner: &Inner,
    acq: &mut Acquisition,
    request: &Request,
    queued: Option<&Queued>,
    at: Option<Instant>,
    now: Instant,
) {
    let behind_first = acq.waits_in_line()
        && request.arrival.is_some()
        && queued.is_some_and(|q| {
            at.is_some_and(|at| now >= at)
                && inner
                    .waiters
                    .wake_first_instead(&acq.plan().keys[0], &q.place)
        });
    let paused = acq.is_paused();
    if behind_first {
        acq.handle_behind(now);
    } else {
        acq.handle_timeout(now);
    }
    if let (true, false, Some(q)) = (paused, acq.is_paused(), queued) {
        q.place.consume();
    }
}

/// A release notice woke the paused machine at `now`: a fair lock's
/// hand-off to it, if that is what came, else a release.
pub(crate) fn woke(inner: &Inner, acq: &mut Acquisition, now: Instant) {
    // Only a fair lock's release hands the key over.
    let handed = matches!(acq.plan().take, Take::Fair { .. })
        .then(|| inner.waiters.handed_over(&acq.plan().keys[0], acq.token()))
        .flatten();
    match handed {
        Some((after, fence)) => acq.handle_handoff(Handoff { after, fence }, now),
        None => acq.handle_notice(now),
    }
}

/// How long a waiting writer's mark lasts: it outlives the writer's pauses
/// between attempts, not much more; a writer that will not wait leaves none.
pub(crate) fn writer_mark_ms(spec: &AcquireSpec) -> u64 {
    if spec.retry_count == Some(0) || spec.wait_timeout.is_zero() {
        0
    } else {
        ms_of(spec.retry_delay + spec.retry_jitter)
            .saturating_mul(2)
            .max(200)
    }
}

/// How long a waiter's place in a fair line lasts unless its next attempt
/// renews it: a waiter pauses at most retryDelay + retryJitter between
/// attempts, and the floor rides out a process that is not scheduled for a
/// while (a loaded machine, a GC pause). A single attempt takes no place.
pub(crate) fn place_ms(spec: &AcquireSpec) -> u64 {
    if spec.retry_count == Some(0) || spec.wait_timeout.is_zero() {
        return 0;
    }
    ms_of(spec.retry_delay + spec.retry_jitter)
        .saturating_mul(4)
        .max(2_000)
}
