//! Acquire: the all-or-nothing take of a lock's keys on every node, decided
//! at quorum in time (validity = ttl − elapsed − drift, `now` passed in),
//! except that fencing needs the highest fence over every granting node and
//! a failure names every node's answer: both wait for all.

use std::time::{Duration, Instant};

use super::gather::{unexpected, Answer, Reply};
use super::gather::{Gather, Progress};
use crate::core::error::NodeAnswer;
use crate::core::ops::call::Call;
use crate::core::ops::scripts;
use crate::core::quorum::{self, Acquired, Tally};

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
