//! What an acquisition is given (its [`Plan`]) and what it gives back: the
//! commands to send ([`Transmit`]), what to report ([`Event`]) and how it
//! ended ([`Outcome`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::acquire::{self, LeaseTerms, ReadReply};
use super::super::gather::Answer;
use super::super::{permits, release};
use super::decide::Bounds;
use crate::core::base::ms_of;
use crate::core::error::{LockError, NodeAnswer, NodeReport};
use crate::core::model::Keys;
use crate::core::model::{self, line_keys, FairLease, Permits, Token};
use crate::core::ops::call::Call;
use crate::core::quorum::NodeAnswers;

/// What an attempt takes.
#[derive(Debug, Clone)]
pub enum Take {
    /// A lock's keys (`SET NX` on each, with their fence counters).
    Lock,
    /// A semaphore's or read-write lock's permits on one key; `writer`: the
    /// key of a waiting writer's mark, which lasts `mark_ms` (0: none).
    Permits {
        permits: Permits,
        writer: String,
        mark_ms: u64,
    },
    /// A fair lock's key, taken at the head of its line in Redis; `fence`:
    /// its fence counter (with fencing); `place_ms`: how long a place lasts
    /// unless the next attempt renews it (0: one attempt, no place).
    Fair {
        fence: Option<String>,
        place_ms: u64,
    },
    /// A semaphore's or read-write lock's permits, taken in line: only when
    /// they fit beside those of every earlier waiter.
    FairPermits { permits: Permits, place_ms: u64 },
    /// A semaphore's permits on several nodes (Redlock) as numbered slots:
    /// the member naming the slots a quorum granted becomes the holder's
    /// token, and what other nodes granted is undone.
    Slots { permits: Permits },
}

impl Take {
    /// The permits it takes (`None`: a lock).
    pub fn permits(&self) -> Option<Permits> {
        match self {
            Take::Lock => None,
            Take::Permits { permits, .. }
            | Take::FairPermits { permits, .. }
            | Take::Slots { permits } => Some(*permits),
            Take::Fair { .. } => Some(model::fair_permits()),
        }
    }

    /// How long a waiter's place in a fair line lasts unless renewed (0:
    /// not in a fair line).
    pub fn place_ms(&self) -> u64 {
        match self {
            Take::Fair { place_ms, .. } | Take::FairPermits { place_ms, .. } => *place_ms,
            Take::Lock | Take::Permits { .. } | Take::Slots { .. } => 0,
        }
    }

    /// A fresh token for an attempt (it names the permits it holds).
    pub fn token(&self) -> Token {
        model::token(self.permits())
    }

    /// How a node's reply to its attempt reads.
    pub fn reader(&self) -> ReadReply {
        match self {
            Take::Lock => acquire::answer,
            Take::Permits { .. } => permits::attempt_answer,
            Take::Fair { .. } => permits::fair_granted,
            Take::FairPermits { .. } => permits::fair_permits_answer,
            Take::Slots { .. } => permits::slots_answer,
        }
    }

    /// Whether a node's reply to an attempt at a lock took it.
    pub fn taken(reply: &Answer) -> bool {
        acquire::answer(reply.clone()).0 == NodeAnswer::Ok
    }

    /// How a node's reply to an undo reads.
    pub(super) fn undo_answer(&self, reply: Answer, keys: usize) -> NodeAnswer {
        match self {
            Take::Fair { .. } => permits::fair_released(reply),
            Take::Slots { .. } => permits::slots_undone(reply),
            _ => release::answer(reply, keys),
        }
    }

    /// The undo of attempt `token` (a fair lock's hands on a key it took),
    /// but the member `keep` (a Redlock semaphore's slots: the ones it won
    /// with, when it won).
    pub(super) fn undo_call(&self, plan: &Plan, token: &str, keep: &str) -> Call<'static> {
        match self {
            Take::Fair { .. } => {
                permits::fair_release_call(&plan.keys[0], token, plan.channel, false)
            }
            Take::Slots { .. } => {
                permits::slots_undo_call(&plan.keys[0], token, keep, plan.channel)
            }
            _ => release::call(&plan.keys, token, plan.channel),
        }
    }

    /// Whether leaving its line also undoes an attempt (a fair lock's leave
    /// hands on a key its attempt took).
    pub(super) fn leave_undoes(&self) -> bool {
        matches!(self, Take::Fair { place_ms, .. } if *place_ms > 0)
    }

    /// Leaving a fair line for good, once an attempt took a place in it (a
    /// fair lock's also hands on a key its attempt took); `None` for others.
    pub(super) fn leave_call(&self, plan: &Plan, token: &str) -> Option<Call<'static>> {
        match self {
            Take::Fair { place_ms, .. } if *place_ms > 0 => Some(permits::fair_release_call(
                &plan.keys[0],
                token,
                plan.channel,
                true,
            )),
            Take::FairPermits { place_ms, .. } if *place_ms > 0 => {
                Some(permits::leave_call(&plan.keys[0], token))
            }
            _ => None,
        }
    }

    /// Attempt number `n`'s call for `token`; `first`: the slot a Redlock
    /// semaphore's attempt tries first.
    pub(super) fn call(&self, plan: &Plan, token: &str, n: u32, first: u32) -> Call<'static> {
        let ttl_ms = ms_of(plan.lease.ttl);
        let line = || line_keys(&plan.keys[0]);
        match self {
            Take::Lock if n == 1 && plan.plain_first => {
                Call::plain_take(&plan.keys[0], token, ttl_ms)
            }
            Take::Lock => acquire::call_fenced(&plan.keys, &plan.fences, token, ttl_ms),
            Take::Permits {
                permits,
                writer,
                mark_ms,
            } => {
                let lease = model::PermitsLease {
                    key: &plan.keys[0],
                    writer,
                    token,
                    ttl_ms,
                    mark_ms: *mark_ms,
                };
                permits::call(&lease, *permits)
            }
            Take::Fair { fence, place_ms } => permits::fair_call(&FairLease {
                key: &plan.keys[0],
                line: &line(),
                token,
                ttl_ms,
                place_ms: *place_ms,
                // Stored with the place: a hand-off names the attempt it came after.
                attempt: if *place_ms > 0 { u64::from(n) } else { 0 },
                fence: fence.as_deref(),
            }),
            Take::FairPermits { permits, place_ms } => permits::fair_permits_call(
                &FairLease {
                    key: &plan.keys[0],
                    line: &line(),
                    token,
                    ttl_ms,
                    place_ms: *place_ms,
                    attempt: 0,
                    fence: None,
                },
                permits.limit,
            ),
            Take::Slots { permits } => {
                permits::slots_call(&plan.keys[0], token, ttl_ms, *permits, first)
            }
        }
    }
}

/// What an acquisition is asked to do; fixed for its whole life.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Each node's name (`host:port`), in the order replies are numbered.
    pub nodes: Arc<[String]>,
    /// The lock keys, prefixed.
    pub keys: Keys,
    /// The lock keys' fence counters (fencing; else none).
    pub fences: Vec<String>,
    /// How long the client's key prefix is: the keys as the caller named
    /// them follow it ([`Plan::label`]).
    pub prefix_len: usize,
    pub lease: LeaseTerms,
    /// Each node's bound on answering one command.
    pub node_timeout: Duration,
    pub retry_delay: Duration,
    pub retry_jitter: Duration,
    /// Attempts after the first; `None`: as many as the wait allows.
    pub retry_count: Option<u32>,
    /// 0: one attempt, bounded by the node timeout only.
    pub wait_timeout: Duration,
    /// The nodes publish the key's release notices (one key, a plain master
    /// among them): a contended acquisition asks to listen for them.
    pub notices: bool,
    /// The first attempt is plain `SET NX PX` and `PTTL` rather than the
    /// acquire script (a lock of one key without fencing or
    /// `waitReplicas`, on plain masters); later attempts, whose token may
    /// have landed already, take the script.
    pub plain_first: bool,
    /// `waitReplicas` on one master: the driver sends each attempt on a
    /// connection of its own and, once it took the lock, `WAIT`s there for
    /// this many replicas, this long ([`Take::taken`] reads the reply).
    pub wait_replicas: Option<(u32, Duration)>,
    /// The prefix of the channels an undo announces a release on (empty:
    /// none, as on a cluster, which would broadcast it to every node).
    pub channel: &'static str,
    pub take: Take,
}

impl Plan {
    /// The keys as the caller named them, for messages (made only for one).
    pub fn label(&self) -> String {
        let named = |k: &'_ String| k.get(self.prefix_len..).unwrap_or(k).to_string();
        self.keys.iter().map(named).collect::<Vec<_>>().join(", ")
    }

    /// Each node's answer by its name, for an error.
    pub fn reports(&self, answers: &[NodeAnswer]) -> Vec<NodeReport> {
        let report = |(node, answer): (&String, &NodeAnswer)| NodeReport {
            node: node.clone(),
            answer: answer.clone(),
        };
        self.nodes.iter().zip(answers).map(report).collect()
    }

    /// The caller's bounds on retrying, for an acquisition begun at `now`.
    pub(crate) fn bounds(&self, now: Instant) -> Bounds {
        Bounds {
            retry_delay: self.retry_delay,
            retry_count: self.retry_count,
            wait_until: now + self.wait_timeout,
            wait_bounds_attempts: !self.wait_timeout.is_zero(),
        }
    }

    /// Each node's bound on answering an attempt: the node timeout, and an
    /// attempt that waits for replicas (`WAIT`) as long again as it may.
    pub fn attempt_bound(&self) -> Duration {
        self.node_timeout + self.wait_replicas.map_or(Duration::ZERO, |(_, wait)| wait)
    }
}

/// Why a command goes to a node: attempt number `n`, or its undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Attempt(u32),
    Undo(u32),
    /// Leaving a fair line after attempt `n`, the acquisition over.
    Leave(u32),
}

/// A command to send to one node. A driver that cannot reach the node (no
/// connection) answers it with [`NodeAnswer::Unreachable`]: the command did
/// not go out. Any other failure (a timeout, a connection cut after the
/// write) leaves it in doubt.
#[derive(Debug, Clone)]
pub struct Transmit {
    pub node: usize,
    pub purpose: Purpose,
    pub call: Call<'static>,
}

/// What the driver reports or counts; nothing it acts on.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A node failed to answer (an `'error'` event).
    Fault { node: usize, answer: NodeAnswer },
    /// Node `node` answered the won attempt after the outcome: the held
    /// lock's record of answers takes it.
    Late { node: usize, answer: NodeAnswer },
    /// An attempt found the key held by another owner.
    Contended,
    /// A release notice ended a pause.
    Woken,
    /// Contended on one key: release notices for it will shorten the waits
    /// once the driver listens for them (`Acquisition::listening`); joining
    /// the key's line lets the next caller of the client go.
    Listen,
    /// An attempt failed without joining the key's line (an outage, or no
    /// notices to wait for): the next caller of the client may try now.
    Answered,
}

/// A won attempt, for the engine to register as a held lock.
pub struct Won {
    /// The keys as stored.
    pub keys: Keys,
    pub token: Token,
    pub attempts: u32,
    /// When the winning attempt was sent: its validity is counted from here.
    pub started: Instant,
    /// Each node's answer to it (`Pending` for those still out: their
    /// answers come later as [`Event::Late`]).
    pub answers: NodeAnswers,
    /// The highest fence a node handed out (0 without fencing).
    pub fence: i64,
}

/// A fair lock's release handed its key to this waiter: after its attempt
/// number `after` (0: unknown), with `fence` (none without fencing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handoff {
    pub after: u64,
    pub fence: Option<i64>,
}

/// How an acquisition ended.
pub enum Outcome {
    Won(Won),
    Failed(LockError),
}

/// Why a caller stops waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// Its signal aborted.
    Aborted,
    /// The client was closed.
    Closed,
}
