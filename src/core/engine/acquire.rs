//! What both drivers (`drivers/tokio.rs`, `drivers/uvloop/`) share around
//! the acquisition machine (`ops::acquisition`): the checked [`Request`] a
//! caller hands them, its keys checked and its place taken in the line of
//! its client's callers of the key ([`Arrival`]: call order, and whether an
//! earlier caller already waits in the key's queue), what the machine is
//! given for it ([`plan_of`]), and a won attempt becoming a held lock
//! ([`register`]). Waiting in the key's line is `line.rs`'s, the queues and
//! release notices `waiters/`; what a lock kind is lives in `model/`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::Notify;

use crate::core::base::{self, later, wait_until};
use crate::core::config::AcquireSpec;
use crate::core::engine::inner::Inner;
use crate::core::engine::line::{place_ms, writer_mark_ms};
use crate::core::engine::lock::{Lock, LockState, NewLock};
use crate::core::engine::waiters::{Waiters, Waker};
use crate::core::error::{LockError, Result};
use crate::core::model::keys::{self, fence_key, CHANNEL_PREFIX};
use crate::core::model::{self, lock_keys, Keys, Kind, LockKind, Permits};
use crate::core::ops::acquisition::{LeaseTerms, Plan, Take, Won as MachineWon};
use crate::core::ops::{Answers, LateAnswers};

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
    /// A lock's request on the checked `names` ([`checked_names`]) with
    /// options `spec`; no place in line yet ([`Request::in_line`]).
    pub(crate) fn new(names: Keys, spec: AcquireSpec) -> Request {
        Request {
            names,
            spec,
            permits: None,
            arrival: None,
        }
    }

    /// A plain lock's request on `key` of `inner`'s client with options
    /// `spec` (resolved before), its key checked and its place taken among
    /// the client's callers of the key.
    pub(crate) fn lock_key(inner: &Inner, key: String, spec: AcquireSpec) -> Result<Request> {
        let names = checked_names(inner, Keys::One(key))?;
        Ok(Request::new(names, spec).in_line(inner))
    }

    /// A plain lock's request with its place among `inner`'s client's
    /// callers of its key (taken when the caller calls, so that they are
    /// served in call order); several keys take none.
    pub(crate) fn in_line(mut self, inner: &Inner) -> Request {
        if let [name] = &self.names[..] {
            let prefix = &inner.cfg.key_prefix;
            self.arrival = Some(if prefix.is_empty() {
                inner.waiters.arrive(name)
            } else {
                inner.waiters.arrive(&format!("{prefix}{name}"))
            });
        }
        self
    }

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

/// A lock's `keys` on `inner`'s client, checked (and the client still open).
pub(crate) fn checked_names(inner: &Inner, keys: Keys) -> Result<Keys> {
    if inner.closing.begun() {
        return Err(LockError::closed().with_key(keys.join(", ")));
    }
    let names = match keys {
        Keys::One(key) => {
            model::check_key(&key)?;
            Keys::One(key)
        }
        Keys::Many(keys) => lock_keys(keys)?.into(),
    };
    let cfg = &inner.cfg;
    for name in names.iter() {
        model::check_not_derived(name, &cfg.key_prefix)?;
    }
    if inner.has_cluster {
        // One script must reach every key, so they must live in one hash slot.
        let keys = model::prefixed(&cfg.key_prefix, &names);
        let fences: Vec<String> = if cfg.fencing {
            keys.iter().map(|k| fence_key(k)).collect()
        } else {
            Vec::new()
        };
        keys::check_one_slot(&names, &keys, &fences)?;
    }
    Ok(names)
}

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
    if inner.closing.begun() {
        inner.in_background(async move {
            let _ = lock.release().await;
        });
        return Err(LockError::closed());
    }
    Ok(lock)
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

// The callers of one client acquiring one key, in call order: each sends its
// first attempt only once every earlier caller's first attempt was answered.

/// A caller in a key's line of arrivals.
pub(in crate::core::engine) struct Caller {
    seq: u64,
    /// Its first attempt was answered without taking the lock.
    answered: bool,
    /// Notified when its turn may have come, made once a task waits in
    /// [`Arrival::turn`].
    turn: Option<Arc<Notify>>,
    /// Told when its turn may have come, besides a task waiting in [`Arrival::turn`].
    waker: Option<Waker>,
}

/// A caller's place in the line of callers of one client acquiring one key,
/// taken when it is called; leaving it (on drop) lets the next caller go.
pub struct Arrival {
    waiters: Arc<Waiters>,
    key: Arc<str>,
    seq: u64,
}

impl Arrival {
    /// Its number in call order (a waiter's place in the queue follows it).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// True when this caller may send its first attempt: every earlier
    /// caller's first attempt was answered (or that caller is done).
    pub fn may_go(&self) -> bool {
        let lines = base::lock(&self.waiters.lines);
        lines.get(&self.key).is_none_or(|line| {
            line.iter()
                .take_while(|c| c.seq != self.seq)
                .all(|c| c.answered)
        })
    }

    /// `f` on this caller in its line, unless it left it.
    fn me<R>(&self, f: impl FnOnce(&mut Caller) -> R) -> Option<R> {
        let mut lines = base::lock(&self.waiters.lines);
        let line = lines.get_mut(&self.key)?;
        line.iter_mut().find(|c| c.seq == self.seq).map(f)
    }

    /// Completes once [`Arrival::may_go`].
    pub async fn turn(&self) {
        // Left the line: nobody holds it back.
        let Some(turn) = self.me(|me| me.turn.get_or_insert_with(Default::default).clone()) else {
            return;
        };
        wait_until(&turn, || self.may_go()).await
    }

    /// Tells `waker` when this caller's turn may have come (it then asks
    /// [`Arrival::may_go`]); at once if it has.
    pub fn on_turn(&self, waker: Waker) {
        self.me(|me| me.waker = Some(waker.clone()));
        if self.may_go() {
            waker();
        }
    }

    /// This caller's first attempt was answered without taking the lock: the
    /// next caller may send its own.
    pub fn answered(&self) {
        let mut lines = base::lock(&self.waiters.lines);
        let Some(line) = lines.get_mut(&self.key) else {
            return;
        };
        let Some(i) = line.iter().position(|c| c.seq == self.seq) else {
            return;
        };
        if !line[i].answered {
            line[i].answered = true;
            wake_from(line, i + 1);
        }
    }
}

impl Drop for Arrival {
    fn drop(&mut self) {
        let mut lines = base::lock(&self.waiters.lines);
        let Some(line) = lines.get_mut(&self.key) else {
            return;
        };
        let Some(i) = line.iter().position(|c| c.seq == self.seq) else {
            return;
        };
        line.remove(i);
        if line.is_empty() {
            lines.remove(&self.key);
        } else {
            wake_from(line, i);
        }
    }
}

/// Wakes the callers from `i` on that a change there may let go: up to the
/// first one whose first attempt is still out (nobody behind it may go).
fn wake_from(line: &[Caller], i: usize) {
    for c in line.iter().skip(i) {
        if let Some(turn) = &c.turn {
            turn.notify_waiters();
        }
        if !c.answered {
            // The first whose first attempt is still out may go now; the
            // answered ones before it began long ago and need no wake.
            if let Some(waker) = &c.waker {
                waker();
            }
            break;
        }
    }
}

/// The callers of one key in call order: mostly one, kept inline. (A
/// caller leaves by its number, found by a scan: a long line costs the same
/// whether it shifts or not.)
pub(in crate::core::engine) type Line = smallvec::SmallVec<[Caller; 1]>;

/// The line of callers in call order, and whether an earlier caller of the
/// client waits in a key's queue: what a caller's turn is judged by.
impl Waiters {
    /// Takes a place in the line of callers acquiring `key`, in call order.
    pub fn arrive(self: &Arc<Self>, key: &str) -> Arrival {
        let seq = self.next_arrival.fetch_add(1, Ordering::Relaxed);
        let caller = Caller {
            seq,
            answered: false,
            turn: None,
            waker: None,
        };
        let mut lines = base::lock(&self.lines);
        let key = match lines.get_key_value(key) {
            Some((shared, _)) => shared.clone(),
            None => Arc::from(key),
        };
        lines.entry(key.clone()).or_default().push(caller);
        Arrival {
            waiters: self.clone(),
            key,
            seq,
        }
    }

    /// True when a waiter that arrived before `seq` ([`Arrival::seq`]) is
    /// queued for `key`.
    pub fn waiting_before(&self, key: &str, seq: u64) -> bool {
        base::lock(&self.queues)
            .get(key)
            .is_some_and(|q| q.places.front().is_some_and(|p| p.seq < seq))
    }
}
