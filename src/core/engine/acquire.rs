//! What both drivers (`drivers/tokio.rs`, `drivers/uvloop/`) share around
//! the acquisition machine (`ops::acquisition`): the checked [`Request`] a
//! caller hands them (with its place among the client's callers of the
//! key), what the machine is given for it ([`plan_of`]), a won attempt
//! becoming a held lock ([`register`]), and waiting in line for release
//! notices ([`join`], [`Queued`]). What a lock kind is lives in `model/`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::core::config::AcquireSpec;
use crate::core::engine::lock::Lock;
use crate::core::engine::lock::{LockState, NewLock};
use crate::core::error::Result;
use crate::core::model::keys::{self, channel, CHANNEL_PREFIX};
use crate::core::model::Keys;
// The model's type the fast path still names by its former path.
use crate::core::base::{later, ms_of};
use crate::core::engine::inner::Inner;
use crate::core::engine::waiters::{Arrival, Place};
use crate::core::model::{self, Kind, LockKind, Permits};
use crate::core::ops::acquisition::LeaseTerms;
use crate::core::ops::acquisition::{Acquisition, Handoff, Plan, Take, Won as MachineWon};
use crate::core::ops::{Answers, LateAnswers};
use crate::core::transport::tokio::NoticeSink;

/// A checked acquisition, ready to send.
pub struct Request {
    pub(crate) names: Keys,
    pub(crate) spec: AcquireSpec,
    /// Permits of a semaphore rather than a lock.
    pub(crate) permits: Option<Permits>,
    /// The caller's place among this client's callers of the key (a plain
    /// lock on one key): its first attempt goes after theirs were answered.
    pub(crate) arrival: Option<Arrival>,
}

impl Request {
    /// The names [`plan_of`] moved to `plan` (none when it copied them).
    pub(crate) fn names_back(&mut self, plan: Plan) {
        if self.names.is_empty() {
            self.names = plan.keys;
        }
    }

    /// The resolved options.
    pub fn spec(&self) -> &AcquireSpec {
        &self.spec
    }
}

// What the acquisition machine is given for a request on this client: its
// [`Plan`] (nodes, keys, lease, bounds, and what an attempt takes).

/// What the machine is given for `request`. Without a key prefix the
/// names are the stored keys: they move from the request to the plan
/// ([`Request::names_back`] returns them).
pub(crate) fn plan_of(inner: &Inner, request: &mut Request) -> Plan {
    let keys = if inner.cfg.key_prefix.is_empty() {
        std::mem::replace(&mut request.names, Keys::Many(Vec::new()))
    } else {
        model::prefixed(&inner.cfg.key_prefix, &request.names)
    };
    let spec = &request.spec;
    let take = match request.permits {
        None => Take::Lock,
        Some(p) if p.kind == Kind::Fair => Take::Fair {
            fence: inner.cfg.fencing.then(|| keys::fence_key(&keys[0])),
            place_ms: place_ms(spec),
        },
        Some(permits) if permits.kind == Kind::Slots => Take::Slots { permits },
        Some(permits) if permits.kind.is_fair() => Take::FairPermits {
            permits,
            place_ms: place_ms(spec),
        },
        Some(permits) => Take::Permits {
            permits,
            writer: model::writer_key(&keys[0]),
            mark_ms: writer_mark_ms(spec),
        },
    };
    // Permits carry no fence.
    let fencing = inner.cfg.fencing && matches!(take, Take::Lock | Take::Fair { .. });
    // Without notices (a cluster), waiters keep their retry timers.
    let plain = inner.hears_notices;
    Plan {
        nodes: inner.node_names.clone(),
        fences: if fencing && take.permits().is_none() {
            keys.iter().map(|k| keys::fence_key(k)).collect()
        } else {
            Vec::new()
        },
        notices: keys.len() == 1 && plain,
        // (A cluster member keeps the script: one command, routed by key.)
        plain_first: keys.len() == 1
            && !fencing
            && matches!(take, Take::Lock)
            && spec.wait_replicas.is_none()
            && !inner.has_cluster,
        channel: if plain { CHANNEL_PREFIX } else { "" },
        // (Several nodes: a quorum of masters stands for the replicas.)
        wait_replicas: spec
            .wait_replicas
            .filter(|_| inner.nodes.len() == 1 && matches!(take, Take::Lock)),
        take,
        keys,
        prefix_len: inner.cfg.key_prefix.len(),
        lease: LeaseTerms {
            ttl: spec.ttl,
            drift: spec.drift,
            min_validity: spec.min_validity,
            fencing,
        },
        node_timeout: spec.node_timeout,
        retry_delay: spec.retry_delay,
        retry_jitter: spec.retry_jitter,
        retry_count: spec.retry_count,
        wait_timeout: spec.wait_timeout,
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
fn place_ms(spec: &AcquireSpec) -> u64 {
    if spec.retry_count == Some(0) || spec.wait_timeout.is_zero() {
        return 0;
    }
    ms_of(spec.retry_delay + spec.retry_jitter)
        .saturating_mul(4)
        .max(2_000)
}

// Registering a won attempt as a held lock: the lock's state, its counters,
// and its place in the watchdog; a lock registered as `close()` ran is
// given back.

/// A won attempt becomes a held lock of `request` on its keys, renewed by the
/// watchdog (which this starts, so it runs within the runtime), or
/// `ERR_LOCK_CLOSED` if the client was closed meanwhile (it is given back);
/// `replicas`: how many acknowledged it (`waitReplicas`). The late answers
/// of its nodes still out go to the lock's record through the
/// [`LateAnswers`].
pub(crate) fn register(
    inner: &Arc<Inner>,
    won: MachineWon,
    request: &Request,
    replicas: Option<u32>,
) -> (Result<Lock>, LateAnswers) {
    let spec = &request.spec;
    // Only the fault suite's build moves it (and reads the clock for it).
    let started = if cfg!(feature = "broken-modes") {
        crate::core::broken::validity_start(won.started)
    } else {
        won.started
    };
    let drift = spec.drift;
    let state = Arc::new(LockState::new(NewLock {
        id: crate::core::engine::lock::new_id(),
        keys: won.keys,
        prefix_len: inner.cfg.key_prefix.len(),
        token: won.token,
        kind: LockKind::of(request.permits),
        attempts: won.attempts,
        deadline: later(started, spec.ttl.saturating_sub(drift)),
        ttl: spec.ttl,
        renew_every: spec.renew_interval,
        hold_until: spec.max_hold.map(|h| later(started, h)),
        auto_renew: spec.auto_renew,
        // Counters start at 1: 0 is an attempt that took no fence
        // (permits), which has none rather than a misleading 0.
        fence: Some(won.fence).filter(|&f| inner.cfg.fencing && f > 0),
        wait_replicas: spec.wait_replicas,
        answers: Answers::default(),
    }));
    let late = LateAnswers::begin(state.clone(), &won.answers);
    state.set_replicas(replicas);
    inner.stats.acquired.fetch_add(1, Ordering::Relaxed);
    inner.stats.held.fetch_add(1, Ordering::Relaxed);
    inner.watchdog.start(inner);
    inner.watchdog.watch(state.clone());
    (unless_closed(inner, Lock::new(state, inner.clone())), late)
}

/// `lock`, just registered, or `ERR_LOCK_CLOSED` when `close()` ran while
/// it was being registered: it is then given back in the background
/// (which `close()` awaits), whichever driver took it.
pub(crate) fn unless_closed(inner: &Arc<Inner>, lock: Lock) -> Result<Lock> {
    if let Err(closed) = inner.ensure_accepting() {
        inner.in_background(async move {
            let _ = lock.release().await;
        });
        return Err(closed);
    }
    Ok(lock)
}

// Waiting in line for a held key: the first waiter of a client subscribes to
// the key's release notices on every node; leaving the line (on drop) ends
// the subscription once nobody else waits. And what both drivers do there
// around the machine: join behind earlier callers, wake the first in line
// instead when a timer fires behind it, hand it a notice or a hand-off.

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

/// Whether `request`, its turn come, joins the key's line behind earlier
/// callers of its client that already wait there, rather than try at once
/// (a try just after a release would overtake them).
pub(crate) fn behind_earlier_callers(inner: &Inner, plan: &Plan, request: &Request) -> bool {
    let Some(arrival) = &request.arrival else {
        return false;
    };
    let waits = plan.notices && plan.retry_count != Some(0) && !plan.wait_timeout.is_zero();
    waits && inner.waiters.waiting_before(&plan.keys[0], arrival.seq())
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
