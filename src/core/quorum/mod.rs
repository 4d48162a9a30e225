//! The quorum decision, written once. Every operation sends its script to all
//! nodes, then asks this module what the answers mean: a tally, a verdict, and
//! the one error for "too few nodes". Pure: no I/O and no clock of its own.
//! `slots.rs` judges a semaphore's slot attempt on several nodes; the
//! answers so far are kept by the one collector, `ops::Gather`.

use std::time::Duration;

use smallvec::SmallVec;

use crate::core::error::{ErrorCode, LockError, NodeAnswer, NodeReport};

/// One answer per node, inline for one node (no allocation per operation
/// on a single Redis; an acquisition stays small).
pub type NodeAnswers = SmallVec<[NodeAnswer; 1]>;

/// Nodes that must agree among `nodes`: floor(N/2) + 1 (1 of 1 for one node).
pub fn needed(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// The clock-drift allowance for a lease of `ttl`: ttl × factor + 2 ms.
pub fn drift(ttl: Duration, factor: f64) -> Duration {
    ttl.mul_f64(factor).saturating_add(Duration::from_millis(2))
}

/// What is left of a lease once the answers are in: ttl − elapsed − drift,
/// with `elapsed` measured from before the first request was sent.
pub fn validity(ttl: Duration, elapsed: Duration, drift: Duration) -> Duration {
    ttl.saturating_sub(elapsed).saturating_sub(drift)
}

/// How many nodes said what.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub nodes: usize,
    pub ok: usize,
    pub held: usize,
    pub not_held: usize,
    /// The longest remaining TTL another owner's key had, when known.
    pub longest_pttl: Option<u64>,
}

impl Tally {
    /// The tally of `answers`, one per node.
    pub fn of<'a>(answers: impl IntoIterator<Item = &'a NodeAnswer>) -> Tally {
        let mut t = Tally::default();
        for a in answers {
            t.nodes += 1;
            match a {
                NodeAnswer::Ok => t.ok += 1,
                NodeAnswer::Held { pttl_ms } => {
                    t.held += 1;
                    t.longest_pttl = t.longest_pttl.max(*pttl_ms);
                }
                NodeAnswer::NotHeld => t.not_held += 1,
                _ => {}
            }
        }
        t
    }

    pub fn needed(&self) -> usize {
        needed(self.nodes)
    }

    /// A quorum said yes: with the answers of a Redlock operation coming in,
    /// its success is decided here, whatever the other nodes answer.
    pub fn agreed(&self) -> bool {
        self.ok >= self.needed()
    }

    /// The one lost-lock rule: so many nodes answered that the key is gone or
    /// someone else's that a quorum can no longer be ours.
    pub fn lost(&self) -> bool {
        self.not_held + self.held > self.nodes - self.needed()
    }
}

/// Whether enough nodes gave a usable answer (not a fault) at all.
pub fn reached(answers: &[NodeAnswer]) -> bool {
    answers.iter().filter(|a| !a.is_fault()).count() >= needed(answers.len())
}

/// Whether an attempt that too few nodes answered may succeed if tried again
/// later: enough nodes failed only for reasons that pass (see
/// [`NodeAnswer::is_transient`]) to make up a quorum with those that answered.
pub fn worth_retrying(answers: &[NodeAnswer]) -> bool {
    let hopeless = answers
        .iter()
        .filter(|a| a.is_fault() && !a.is_transient())
        .count();
    answers.len() - hopeless >= needed(answers.len())
}

/// What one acquisition attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquired {
    /// A quorum took the lock with at least the validity asked for.
    Won,
    /// Another owner holds the key on some node: worth waiting for.
    Contended { longest_pttl: Option<u64> },
    /// A quorum took it, but too late to leave the validity asked for.
    TooLate,
    /// Too few nodes answered.
    NoQuorum,
}

pub fn acquired(t: &Tally, validity: Duration, min_validity: Duration) -> Acquired {
    if t.agreed() && validity >= min_validity {
        Acquired::Won
    } else if t.held > 0 {
        Acquired::Contended {
            longest_pttl: t.longest_pttl,
        }
    } else if t.agreed() {
        Acquired::TooLate
    } else {
        Acquired::NoQuorum
    }
}

/// What a renewal or manual extension came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewed {
    /// A quorum re-armed the keys and validity remains.
    Renewed,
    /// A quorum re-armed the keys, but the answers came too late to leave validity.
    TooLate,
    /// The keys are gone or another owner's on too many nodes: the lock is lost.
    Lost,
    /// Too few nodes answered; the lock may still be ours.
    NoQuorum,
}

/// `in_time`: the new deadline (start + ttl − drift) is still ahead.
pub fn renewed(t: &Tally, in_time: bool) -> Renewed {
    if t.agreed() {
        if in_time {
            Renewed::Renewed
        } else {
            Renewed::TooLate
        }
    } else if t.lost() {
        Renewed::Lost
    } else {
        Renewed::NoQuorum
    }
}

/// What a release came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// A quorum deleted our keys.
    Released,
    /// So many nodes answered that the key is gone or someone else's that
    /// a quorum was no longer ours: it was lost.
    NotOurs,
    /// Neither: too few nodes answered to tell.
    NoQuorum,
}

pub fn released(t: &Tally) -> Released {
    if t.agreed() {
        Released::Released
    } else if t.lost() {
        // The one lost-lock rule, as for a renewal: a key gone on a minority
        // (a renewal that did not reach it) beside nodes that did not answer
        // proves nothing.
        Released::NotOurs
    } else {
        Released::NoQuorum
    }
}

/// The holder a quorum agrees on, from the `(value, pttl)` pairs the nodes
/// hold for one key: its value and the shortest PTTL among them.
pub fn holder(values: &[(String, i64)], nodes: usize) -> Option<(&str, i64)> {
    let mut best: Option<(&str, usize, i64)> = None;
    for (v, _) in values {
        let same = values.iter().filter(|(w, _)| w == v);
        let count = same.clone().count();
        let shortest = same.map(|(_, p)| *p).min().unwrap_or(-2);
        if best.is_none_or(|(_, c, _)| count > c) {
            best = Some((v, count, shortest));
        }
    }
    best.filter(|(_, count, _)| *count >= needed(nodes))
        .map(|(v, _, pttl)| (v, pttl))
}

/// The error for too few nodes: with one node, that node's own fault (a
/// connection or Redis error, its cause kept); with several, `ERR_LOCK_QUORUM`
/// with `message()`. Either way it carries every node's answer.
pub fn no_quorum(reports: Vec<NodeReport>, message: impl FnOnce() -> String) -> LockError {
    let err = match reports.as_slice() {
        [only] => node_error(only),
        _ => LockError::new(ErrorCode::Quorum, message()),
    };
    err.with_nodes(reports)
}

/// A single node's fault as an error of its own.
fn node_error(report: &NodeReport) -> LockError {
    let code = match report.answer {
        // MOVED to a master that died, CLUSTERDOWN, READONLY after a
        // failover...: the master was out of reach, not a refusal.
        ref a @ NodeAnswer::ErrorReply(_) if !a.is_redirection() => ErrorCode::Redis,
        _ => ErrorCode::Connection,
    };
    let err = LockError::new(code, format!("Redis at {}: {}", report.node, report.answer));
    match report.answer.cause() {
        Some(cause) => err.with_source(cause),
        None => err,
    }
}

pub(crate) mod slots;

#[cfg(test)]
mod tests;
