//! What an acquisition is given (its [`Plan`]) and what it gives back: the
//! commands to send ([`Transmit`]), what to report ([`Event`]) and how it
//! ended ([`Outcome`]).

use std::time::{Duration, Instant};

use super::super::acquire::{self, LeaseTerms, ReadReply};
use super::super::permits;
use crate::core::error::{LockError, NodeAnswer};
use crate::core::model::{self, Answers, Permits};
use crate::core::scripts::Call;
use crate::core::time::ms_of;

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
}

impl Take {
    /// The permits it takes (`None`: a lock).
    pub fn permits(&self) -> Option<Permits> {
        match self {
            Take::Lock => None,
            Take::Permits { permits, .. } => Some(*permits),
        }
    }

    /// A fresh token for an attempt (it names the permits it holds).
    pub fn token(&self) -> String {
        model::token(self.permits())
    }

    /// How a node's reply to its attempt reads.
    pub fn reader(&self) -> ReadReply {
        match self {
            Take::Lock => acquire::answer,
            Take::Permits { .. } => permits::attempt_answer,
        }
    }

    /// Its attempt's call for `token`.
    pub(super) fn call(&self, plan: &Plan, token: &str) -> Call<'static> {
        let ttl_ms = ms_of(plan.lease.ttl);
        match self {
            Take::Lock => acquire::call(&plan.script_keys, plan.keys.len(), token, ttl_ms),
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
        }
    }
}

/// What an acquisition is asked to do; fixed for its whole life.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Each node's name (`host:port`), in the order replies are numbered.
    pub nodes: Vec<String>,
    /// The lock keys, prefixed.
    pub keys: Vec<String>,
    /// The acquire script's keys: the lock keys, then their fence counters.
    pub script_keys: Vec<String>,
    /// The keys as the caller named them, for messages.
    pub label: String,
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
    pub take: Take,
}

/// Why a command goes to a node: attempt number `n`, or its undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Attempt(u32),
    Undo(u32),
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
    /// An attempt found the key held by another owner.
    Contended,
    /// A release notice ended a pause.
    Woken,
    /// Contended on one key: release notices for it will shorten the waits
    /// once the driver listens for them ([`Acquisition::listening`]); joining
    /// the key's line lets the next caller of the client go.
    Listen,
    /// An attempt failed without joining the key's line (an outage, or no
    /// notices to wait for): the next caller of the client may try now.
    Answered,
}

/// A won attempt, for the engine to register as a held lock.
pub struct Won {
    pub token: String,
    pub attempts: u32,
    /// When the winning attempt was sent: its validity is counted from here.
    pub started: Instant,
    /// Each node's answer to it (`Pending` for those still out).
    pub answers: Vec<NodeAnswer>,
    /// The same, filled in by the nodes that answer after the outcome.
    pub record: Answers,
    /// The highest fence a node handed out (0 without fencing).
    pub fence: i64,
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
