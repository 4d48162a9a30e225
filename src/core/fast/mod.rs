//! The fast path's napi-free half: a plain connection's transport
//! ([`wire`]) and the acquire, release and extend operations as state
//! machines fed one node reply at a time. Whoever owns the sockets (the JS
//! thread's event loop) sends [`Packed`] commands and hands each reply to
//! `answer`; the outcome is the same as the tokio path's: the same scripts,
//! the same quorum verdicts, the same lock state, errors and node reports.

pub mod wire;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Cmd, ConnectionInfo, Script, Value};

use crate::core::acquire::{Attempt, Request, Resume, Won};
use crate::core::broken::{self, Broken};
use crate::core::client::Client;
use crate::core::error::{LockError, NodeAnswer, Result};
use crate::core::keys::{self, CHANNEL_PREFIX};
use crate::core::lock::Lock;
use crate::core::lock_state::{Answers, LockState, Status};
use crate::core::quorum::{self, Acquired, Tally};
use crate::core::scripts;
use crate::core::shared::{Inner, Running};
use crate::core::time::ms_of;

pub use wire::{Done, OnReply, Reply, Socket, Wire};

/// `LOCKDOG_FAST_PATH=0` (or `false`, `off`) keeps every operation on tokio.
pub fn switched_off() -> bool {
    matches!(
        std::env::var("LOCKDOG_FAST_PATH").as_deref(),
        Ok("0" | "false" | "off")
    )
}

/// A script call packed twice: EVALSHA, and the EVAL sent on NOSCRIPT.
pub struct Packed {
    pub evalsha: Vec<u8>,
    pub eval: Vec<u8>,
}

fn packed(script: &Script, source: &str, keys: &[String], args: impl Fn(&mut Cmd)) -> Packed {
    let mut sha = redis::cmd("EVALSHA");
    sha.arg(script.get_hash()).arg(keys.len()).arg(keys);
    args(&mut sha);
    let mut eval = redis::cmd("EVAL");
    eval.arg(source).arg(keys.len()).arg(keys);
    args(&mut eval);
    Packed {
        evalsha: sha.get_packed_command(),
        eval: eval.get_packed_command(),
    }
}

/// The answers of one operation as they come in; after its outcome, the
/// nodes still out are recorded late, their faults reported, and the
/// operation counts as background work (`settled()`, `close()`) until the
/// last one answered.
struct Gather<T> {
    inner: Arc<Inner>,
    replies: Vec<Option<(NodeAnswer, T)>>,
    late: Option<Late>,
}

struct Late {
    record: Answers,
    op: u64,
    _running: Option<Running>,
}

impl<T> Gather<T> {
    fn new(inner: Arc<Inner>) -> Gather<T> {
        let replies = inner.nodes.iter().map(|_| None).collect();
        Gather {
            inner,
            replies,
            late: None,
        }
    }

    /// Node `i`'s answer; false when it came after the outcome.
    fn put(&mut self, i: usize, answer: NodeAnswer, extra: T) -> bool {
        let Some(late) = &mut self.late else {
            self.replies[i] = Some((answer, extra));
            return true;
        };
        if answer.is_fault() {
            self.inner.report_fault(&self.inner.nodes[i], &answer);
        }
        late.record.late(late.op, i, answer.clone());
        self.replies[i] = Some((answer, extra));
        if self.all_in() {
            self.late = None;
        }
        false
    }

    /// Some node answered with a fault (reported as an event).
    fn faulted(&self) -> bool {
        self.replies.iter().flatten().any(|(a, _)| a.is_fault())
    }

    fn all_in(&self) -> bool {
        self.replies.iter().all(Option::is_some)
    }

    fn tally(&self) -> Tally {
        let mut t = Tally::of(&self.answers());
        t.nodes = self.replies.len();
        t
    }

    fn answers(&self) -> Vec<NodeAnswer> {
        self.replies
            .iter()
            .map(|r| r.as_ref().map_or(NodeAnswer::Pending, |(a, _)| a.clone()))
            .collect()
    }

    /// The outcome is decided on the answers in: records them in `record`.
    fn decide(&mut self, record: &Answers) -> Vec<NodeAnswer> {
        let answers = self.answers();
        let op = record.start(answers.clone());
        if !self.all_in() {
            self.late = Some(Late {
                record: record.clone(),
                op,
                _running: Some(self.inner.track()),
            });
        }
        answers
    }
}

impl Client {
    /// Where the fast path may connect for this client: every node a plain
    /// master (no TLS, no cluster, RESP2), and no deliberately broken mode.
    pub fn fast_targets(&self) -> Option<Vec<ConnectionInfo>> {
        let inner = self.inner();
        if inner.cfg.has_cluster() || broken::mode() != Broken::None {
            return None;
        }
        inner.nodes.iter().map(|n| n.plain_info()).collect()
    }

    /// A first acquire attempt for the fast path; the request back when it
    /// is not one (permits, `waitReplicas`, a closed client).
    pub fn fast_acquire(
        &self,
        request: Box<Request>,
    ) -> std::result::Result<FastAcquire, Box<Request>> {
        let inner = self.inner().clone();
        if request.permits.is_some()
            || request.spec.wait_replicas.is_some()
            || inner.ensure_open().is_err()
        {
            return Err(request);
        }
        let keys = keys::prefixed(&inner.cfg.key_prefix, &request.names);
        // Callers of this client already wait for the key: a first attempt
        // sent at once would overtake them (they are woken by the release
        // notice on the runtime). Take the runtime path, behind them.
        if keys.iter().any(|k| inner.waiters.waiting(k)) {
            return Err(request);
        }
        let script_keys = keys::script_keys(&keys, inner.cfg.fencing);
        let token = uuid::Uuid::new_v4().to_string();
        let ttl_ms = ms_of(request.spec.ttl);
        let locked = keys.len();
        let packed = packed(
            &scripts::ACQUIRE,
            include_str!("../../scripts/acquire.lua"),
            &script_keys,
            |c| {
                c.arg(&token).arg(ttl_ms).arg(locked);
            },
        );
        let timeout = inner.cfg.node_timeout_for(request.spec.ttl);
        Ok(FastAcquire {
            gather: Gather::new(inner.clone()),
            inner,
            request: Some((request, keys, token)),
            packed,
            timeout,
            started: Instant::now(),
            record: Answers::default(),
            undo: None,
        })
    }
}

/// What a fast first attempt came to.
pub enum Outcome {
    Won(Lock),
    Failed(LockError),
    /// Not taken: the acquisition goes on on tokio from this attempt.
    Resume(Box<Resume>),
}

/// A first acquire attempt on every node, its answers so far.
pub struct FastAcquire {
    inner: Arc<Inner>,
    request: Option<(Box<Request>, Vec<String>, String)>,
    pub packed: Packed,
    /// Each node's bound, from the moment of sending.
    pub timeout: Duration,
    started: Instant,
    gather: Gather<i64>,
    record: Answers,
    /// A failed attempt's token-checked release, and where it is due.
    undo: Option<(Packed, Vec<usize>, Duration)>,
}

impl FastAcquire {
    /// Some node answered with a fault (its event goes first).
    pub fn faulted(&self) -> bool {
        self.gather.faulted()
    }

    /// A failed attempt's undo: the release and the nodes it goes to (the
    /// other path undoes it too; this one lands behind the attempt).
    pub fn take_undo(&mut self) -> Option<(Packed, Vec<usize>, Duration)> {
        self.undo.take()
    }

    /// Marks the moment before the first command goes out (the validity clock).
    pub fn sending(&mut self) {
        self.started = Instant::now();
    }

    /// Node `i`'s reply; the outcome once it is decided (at most once).
    pub fn answer(&mut self, i: usize, reply: Reply) -> Option<Outcome> {
        let (answer, fence) = acquire_answer(reply);
        if !self.gather.put(i, answer, fence) {
            return None;
        }
        let (request, _, _) = self.request.as_ref()?;
        let spec = &request.spec;
        let inner = &self.inner;
        let drift = inner.cfg.drift_for(spec.ttl);
        let started = broken::validity_start(self.started);
        let validity = || quorum::validity(spec.ttl, started.elapsed(), drift);
        let t = self.gather.tally();
        // As on tokio: a quorum in time decides, except that fencing needs the
        // highest value over every granting node, and a failure every answer.
        let decided = self.gather.all_in()
            || (!inner.cfg.fencing && t.agreed() && validity() >= spec.min_validity);
        if !decided {
            return None;
        }
        let answers = self.gather.decide(&self.record);
        let attempt = Attempt {
            fence: self
                .gather
                .replies
                .iter()
                .flatten()
                .map(|(_, f)| *f)
                .max()
                .unwrap_or(0),
            sent: vec![true; answers.len()],
            answers,
            record: self.record.clone(),
            started: self.started,
            replicas: None,
            stray: Vec::new(),
            member: None,
        };
        let verdict = quorum::acquired(&Tally::of(&attempt.answers), validity(), spec.min_validity);
        let (request, keys, token) = self.request.take()?;
        if verdict != Acquired::Won || inner.ensure_open().is_err() {
            let nodes = attempt.to_undo();
            if !nodes.is_empty() {
                let release = release_packed(&keys, &token);
                self.undo = Some((release, nodes, self.timeout));
            }
            return Some(Outcome::Resume(Box::new(Resume {
                request: *request,
                token,
                attempt,
            })));
        }
        inner.report_faults(&attempt.answers);
        let lock = inner.register(Won {
            keys,
            token,
            attempts: 1,
            started,
            spec: &request.spec,
            attempt: &attempt,
        });
        if inner.ensure_open().is_err() {
            // close() ran while this lock was being registered: give it back.
            let back = lock.clone();
            inner.in_background(async move {
                let _ = back.release().await;
            });
            return Some(Outcome::Failed(LockError::closed()));
        }
        Some(Outcome::Won(lock))
    }
}

fn acquire_answer(reply: Reply) -> (NodeAnswer, i64) {
    let value = match reply {
        Ok(v) => v,
        Err(answer) => return (answer, 0),
    };
    if let Some(answer) = wire::error_reply(&value) {
        return (answer, 0);
    }
    let ints: Option<Vec<i64>> = match &value {
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::Int(n) => Some(*n),
                _ => None,
            })
            .collect(),
        _ => None,
    };
    match ints.as_deref() {
        Some([1, fence, ..]) => (NodeAnswer::Ok, *fence),
        Some([0, pttl, ..]) => (
            NodeAnswer::Held {
                pttl_ms: u64::try_from(*pttl).ok(),
            },
            0,
        ),
        _ => (
            NodeAnswer::ErrorReply(format!("unexpected acquire reply {value:?}").into()),
            0,
        ),
    }
}

/// The release script for `keys` held by `token` (notices for waiters on).
fn release_packed(keys: &[String], token: &str) -> Packed {
    packed(
        &scripts::RELEASE,
        include_str!("../../scripts/release.lua"),
        keys,
        |c| {
            c.arg(token).arg(CHANNEL_PREFIX);
        },
    )
}

/// A release on every node, its answers so far.
pub struct FastRelease {
    inner: Arc<Inner>,
    state: Arc<LockState>,
    pub packed: Packed,
    pub timeout: Duration,
    gather: Gather<()>,
    decided: bool,
}

/// Whether `lock` is released by the lock script the fast path sends: a fair
/// lock's release hands the key to the next waiter in line, and a semaphore
/// attempt on several nodes is undone by its own script (both on tokio).
pub fn plain_release(lock: &Lock) -> bool {
    let token = &lock.parts().0.token;
    !token.starts_with(crate::core::node::FAIR_TOKEN)
        && !crate::core::acquire::is_slot_attempt(token)
}

/// Starts releasing `lock`: `Err` with the answer when there is nothing to
/// send (it had already ended), as on tokio.
pub fn fast_release(lock: &Lock) -> std::result::Result<FastRelease, bool> {
    let (state, inner) = lock.parts();
    if !state.end_released() {
        return Err(false);
    }
    inner.watchdog.unwatch(state.id);
    inner.stats.held.fetch_sub(1, Ordering::Relaxed);
    let packed = release_packed(&state.keys, &state.token);
    Ok(FastRelease {
        gather: Gather::new(inner.clone()),
        inner: inner.clone(),
        state: state.clone(),
        packed,
        timeout: inner.cfg.command_timeout,
        decided: false,
    })
}

impl FastRelease {
    /// Some node answered with a fault (its event goes first).
    pub fn faulted(&self) -> bool {
        self.gather.faulted()
    }

    pub fn answer(&mut self, i: usize, reply: Reply) -> Option<Result<bool>> {
        let keys = self.state.keys.len() as i64;
        let answer = match reply {
            Ok(Value::Int(n)) if n == keys => NodeAnswer::Ok,
            Ok(Value::Int(_)) => NodeAnswer::NotHeld,
            Ok(other) => wire::error_reply(&other).unwrap_or_else(|| {
                NodeAnswer::ErrorReply(format!("unexpected reply {other:?}").into())
            }),
            Err(answer) => answer,
        };
        if !self.gather.put(i, answer, ()) || self.decided {
            return None;
        }
        if !(self.gather.tally().agreed() || self.gather.all_in()) {
            return None;
        }
        self.decided = true;
        let answers = self.gather.decide(&self.state.answers);
        let out = self.inner.release_verdict(&self.state, &answers);
        if let Ok(true) = out {
            self.inner.stats.released.fetch_add(1, Ordering::Relaxed);
        }
        Some(out)
    }
}

/// A manual extension on every node, its answers so far.
pub struct FastExtend {
    inner: Arc<Inner>,
    state: Arc<LockState>,
    ttl: Duration,
    started: Instant,
    pub packed: Packed,
    pub timeout: Duration,
    gather: Gather<()>,
    /// Holds off renewals of this lock until the outcome.
    lease: Option<tokio::sync::OwnedMutexGuard<()>>,
}

/// Starts extending `lock` to `ttl`; `None` sends it the tokio way, which
/// gives every error of a lock that cannot be extended, and waits for a
/// renewal of it in flight.
pub fn fast_extend(lock: &Lock, ttl: Duration) -> Option<FastExtend> {
    let (state, inner) = lock.parts();
    let single_acked = state.wait_replicas.is_some() && inner.nodes.len() == 1;
    if inner.ensure_open().is_err()
        || state.status() != Status::Held
        || ttl <= inner.cfg.drift_for(ttl)
        || single_acked
    {
        return None;
    }
    let lease = state.try_lease_guard()?;
    state.next_generation();
    let ttl_ms = ms_of(ttl);
    let packed = packed(
        &scripts::EXTEND,
        include_str!("../../scripts/extend.lua"),
        &state.keys,
        |c| {
            c.arg(&state.token).arg(ttl_ms);
        },
    );
    Some(FastExtend {
        gather: Gather::new(inner.clone()),
        inner: inner.clone(),
        state: state.clone(),
        ttl,
        started: Instant::now(),
        packed,
        timeout: inner.cfg.node_timeout_for(ttl),
        lease: Some(lease),
    })
}

impl FastExtend {
    /// Some node answered with a fault (its event goes first).
    pub fn faulted(&self) -> bool {
        self.gather.faulted()
    }

    pub fn answer(&mut self, i: usize, reply: Reply) -> Option<Result<()>> {
        let answer = match reply {
            Ok(Value::Int(1)) => NodeAnswer::Ok,
            Ok(Value::Int(_)) => NodeAnswer::NotHeld,
            Ok(other) => wire::error_reply(&other).unwrap_or_else(|| {
                NodeAnswer::ErrorReply(format!("unexpected reply {other:?}").into())
            }),
            Err(answer) => answer,
        };
        if !self.gather.put(i, answer, ()) || self.lease.is_none() {
            return None;
        }
        if !(self.gather.tally().agreed() || self.gather.all_in()) {
            return None;
        }
        let answers = self.gather.decide(&self.state.answers);
        let out = self
            .inner
            .extended(&self.state, &answers, self.started, self.ttl);
        self.lease = None;
        Some(out)
    }
}
