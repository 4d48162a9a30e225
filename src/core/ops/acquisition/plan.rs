//! What an acquisition is given (its [`Plan`], and [`Take`]: what it
//! takes, with each kind's attempt call and how a node's reply to it reads)
//! and what it sends ([`Transmit`]); and one attempt on every node, its
//! answers decided at quorum in time ([`Acquire`]: validity = ttl −
//! elapsed − drift, `now` passed in), except that fencing needs the highest
//! fence over every granting node and a failure names every node's answer:
//! both wait for all.
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::gather::{unexpected, Answer, Gather, Progress, Reply};
use super::super::permits;
use super::decide::Bounds;
use crate::core::base::ms_of;
use crate::core::error::{NodeAnswer, NodeReport};
use crate::core::model::Keys;
use crate::core::model::{self, line_keys, FairLease, Permits, Token};
use crate::core::ops::call::Call;
use crate::core::ops::scripts;
use crate::core::quorum::{self, Acquired, Tally};

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
            Take::Lock => answer,
            Take::Permits { .. } => permits::attempt_answer,
            Take::Fair { .. } => permits::fair_granted,
            Take::FairPermits { .. } => permits::fair_permits_answer,
            Take::Slots { .. } => permits::slots_answer,
        }
    }

    /// Whether a node's reply to an attempt at a lock took it.
    pub fn taken(reply: &Answer) -> bool {
        answer(reply.clone()).0 == NodeAnswer::Ok
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
            Take::Lock => call_fenced(&plan.keys, &plan.fences, token, ttl_ms),
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

impl Transmit {
    pub(super) fn new(node: usize, purpose: Purpose, call: Call<'static>) -> Transmit {
        Transmit {
            node,
            purpose,
            call,
        }
    }
}

/// The acquire script for the lock `keys` and their fence counters
/// `fences` (none without fencing).
pub fn call_fenced(keys: &[String], fences: &[String], token: &str, ttl_ms: u64) -> Call<'static> {
    let mut call = Call::new(&scripts::ACQUIRE);
    call.key(keys)
        .key(fences)
        .arg(token)
        .arg(ttl_ms)
        .arg(keys.len());
    call
}

/// One node's reply, `[1, fence]` or `[0, pttl]` (or, to a plain take, OK
/// or `[nil, pttl]`): its answer and the first key's fence value (0 unless
/// granted with fencing).
pub fn answer(reply: Answer) -> (NodeAnswer, i64) {
    let reply = match reply {
        Ok(Reply::Status(ok)) if ok == "OK" => return (NodeAnswer::Ok, 0),
        Ok(reply) => reply,
        Err(answer) => return (answer, 0),
    };
    if let Reply::Array(pair) = &reply {
        match pair.as_slice() {
            [Reply::Status(ok), _] if ok == "OK" => return (NodeAnswer::Ok, 0),
            [Reply::Nil, Reply::Int(pttl)] => {
                let pttl_ms = u64::try_from(*pttl).ok();
                return (NodeAnswer::Held { pttl_ms }, 0);
            }
            [Reply::Error(fault), _] => return (NodeAnswer::ErrorReply(fault.clone()), 0),
            _ => {}
        }
    }
    match reply.ints().as_deref() {
        Some([1, fence, ..]) => (NodeAnswer::Ok, *fence),
        Some([0, pttl, ..]) => (
            NodeAnswer::Held {
                pttl_ms: u64::try_from(*pttl).ok(),
            },
            0,
        ),
        _ => (unexpected(reply, "acquire"), 0),
    }
}

/// Whether an attempt is decided on the answers in: all in, or (without
/// fencing) a quorum with at least `min_validity` left.
pub fn decided(
    tally: &Tally,
    all_in: bool,
    fencing: bool,
    validity: Duration,
    min_validity: Duration,
) -> bool {
    all_in || (!fencing && tally.agreed() && validity >= min_validity)
}

/// What the answers an attempt was decided on mean, with `validity` left.
pub fn verdict(answers: &[NodeAnswer], validity: Duration, min_validity: Duration) -> Acquired {
    quorum::acquired(&Tally::of(answers), validity, min_validity)
}

/// The lease an attempt asked for and how its validity is measured.
#[derive(Debug, Clone, Copy)]
pub struct LeaseTerms {
    pub ttl: Duration,
    pub drift: Duration,
    pub min_validity: Duration,
    pub fencing: bool,
}

impl LeaseTerms {
    /// What is left of the lease at `now` for an attempt sent at `started`.
    pub fn validity(&self, started: Instant, now: Instant) -> Duration {
        quorum::validity(self.ttl, now.saturating_duration_since(started), self.drift)
    }
}

/// How one node's reply to an attempt reads: its answer and its fence.
pub type ReadReply = fn(Answer) -> (NodeAnswer, i64);

/// One attempt on every node, its answers so far.
pub struct Acquire {
    gather: Gather<i64>,
    lease: LeaseTerms,
    read: ReadReply,
    /// Decided only once every node answered.
    all: bool,
}

impl Acquire {
    pub fn new(nodes: usize, lease: LeaseTerms) -> Acquire {
        Acquire {
            gather: Gather::new(nodes),
            lease,
            read: answer,
            all: false,
        }
    }

    /// Decided only once every node answered (a Redlock semaphore's
    /// attempt: which slots a quorum granted is read off every reply).
    pub fn waiting_for_all(mut self) -> Acquire {
        self.all = true;
        self
    }

    /// The replies read by `read` (another kind's attempt script).
    pub fn reading(mut self, read: ReadReply) -> Acquire {
        self.read = read;
        self
    }

    /// Node `i`'s reply at `now`, for an attempt sent at `started`.
    pub fn on_reply(
        &mut self,
        i: usize,
        reply: Answer,
        started: Instant,
        now: Instant,
    ) -> Progress {
        let (answer, fence) = (self.read)(reply);
        let lease = self.lease;
        let all = self.all;
        self.gather.offer(i, answer, fence, |g| {
            decided(
                &g.tally(),
                g.all_in(),
                lease.fencing || all,
                lease.validity(started, now),
                lease.min_validity,
            )
        })
    }

    /// The highest fence value a node granted (0 without fencing).
    pub fn fence(&self) -> i64 {
        self.gather.extras().copied().max().unwrap_or(0)
    }

    /// Some node answered with a fault.
    pub fn faulted(&self) -> bool {
        self.gather.faulted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_takes_replies_read_as_the_scripts_do() {
        let pair = |a: Reply, b: Reply| answer(Ok(Reply::Array(vec![a, b])));
        assert_eq!(
            pair(Reply::Status("OK".into()), Reply::Int(29_999)),
            (NodeAnswer::Ok, 0)
        );
        assert_eq!(
            pair(Reply::Nil, Reply::Int(1_234)),
            (
                NodeAnswer::Held {
                    pttl_ms: Some(1_234)
                },
                0
            )
        );
        // Expired between the two, or a key without a TTL: held, for how long unknown.
        assert_eq!(
            pair(Reply::Nil, Reply::Int(-2)),
            (NodeAnswer::Held { pttl_ms: None }, 0)
        );
        assert_eq!(
            pair(Reply::Nil, Reply::Int(-1)),
            (NodeAnswer::Held { pttl_ms: None }, 0)
        );
        let wrong = pair(Reply::Error("WRONGTYPE Operation".into()), Reply::Int(5));
        assert!(matches!(wrong.0, NodeAnswer::ErrorReply(_)));
        // The script's own replies read as before.
        let script =
            |v: Vec<i64>| answer(Ok(Reply::Array(v.into_iter().map(Reply::Int).collect())));
        assert_eq!(script(vec![1, 7]), (NodeAnswer::Ok, 7));
        assert_eq!(
            script(vec![0, 500, 1]),
            (NodeAnswer::Held { pttl_ms: Some(500) }, 0)
        );
    }
}
