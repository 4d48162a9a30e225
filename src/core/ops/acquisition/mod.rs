//! An acquisition of a plain lock from its first attempt to its outcome, as
//! one machine with no I/O and no clock, in the manner of a sans-I/O protocol
//! state machine: it is given the plan and `now`, and then only takes events
//! ([`handle_reply`](Acquisition::handle_reply), [`handle_timeout`](Acquisition::handle_timeout),
//! [`handle_notice`](Acquisition::handle_notice), [`cancel`](Acquisition::cancel))
//! and answers questions ([`poll_transmit`](Acquisition::poll_transmit): what to
//! send to which node; [`poll_timeout`](Acquisition::poll_timeout): when to be
//! woken next; [`poll_event`](Acquisition::poll_event): what to report;
//! [`outcome`](Acquisition::outcome): won, or the typed failure). A driver
//! sends what it is told, arms one timer, forwards replies and notices, and
//! decides nothing.
//!
//! The rules it runs: an attempt on every node, decided at quorum in time
//! (fencing waits for every node); a lost attempt is undone on the nodes that
//! may hold its token before the next attempt goes out (one node keeps its
//! token, so an attempt that landed without a reply still counts as ours;
//! several nodes get a fresh token per attempt); contention and an outage are
//! waited out within `waitTimeout` and `retryCount`, pausing `retryDelay` +
//! jitter (from an RNG the machine owns), or until the holder's release
//! notice once notices are heard; the undo still owed when it ends is
//! the driver's to send and forget.

pub mod decide;
pub mod failure;
mod plan;
mod steps;
#[cfg(test)]
mod tests;

pub use plan::{Cancel, Event, Outcome, Plan, Purpose, Transmit, Won};

use std::collections::VecDeque;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::SeedableRng;

use self::decide::Bounds;
use self::failure::{aborted, wait_passed};
use super::acquire::Acquire;
use super::reply::Answer;
use crate::core::error::{LockError, NodeAnswer};
use crate::core::model::Answers;

enum Phase {
    /// Attempt `n`, sent at `started`; `out[i]`: node `i` has not answered;
    /// `sent[i]`: the driver took its command.
    Attempt {
        n: u32,
        started: Instant,
        op: Acquire,
        record: Answers,
        out: Vec<bool>,
        sent: Vec<bool>,
    },
    /// Attempt `n` lost and is retried: its undo must land first.
    Undo {
        n: u32,
        out: Vec<bool>,
        deadline: Instant,
        longest_pttl: Option<u64>,
    },
    /// Waiting to make attempt `n + 1` at `until` (sooner on a notice).
    Pause {
        n: u32,
        until: Instant,
    },
    Done,
}

/// One acquisition; see the module docs.
pub struct Acquisition {
    plan: Plan,
    bounds: Bounds,
    token: String,
    phase: Phase,
    rng: SmallRng,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    outcome: Option<Outcome>,
    /// The failure of the last attempt, for a wait that ends later.
    last_failure: Option<LockError>,
    /// Release notices reach this acquisition.
    listening: bool,
    /// Whether the attempt in flight was sent while notices were heard.
    heard: bool,
    asked_to_listen: bool,
}

impl Acquisition {
    /// Starts at `now` with `token` (a fresh one per attempt on several nodes
    /// comes from `uuid`); `seed` seeds the jitter. The first attempt is
    /// ready to send.
    pub fn new(plan: Plan, token: String, seed: u64, now: Instant) -> Acquisition {
        let bounds = Bounds {
            retry_delay: plan.retry_delay,
            retry_count: plan.retry_count,
            wait_until: now + plan.wait_timeout,
            wait_bounds_attempts: !plan.wait_timeout.is_zero(),
        };
        let mut acq = Acquisition {
            plan,
            bounds,
            token,
            phase: Phase::Done,
            rng: SmallRng::seed_from_u64(seed),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            outcome: None,
            last_failure: None,
            listening: false,
            heard: false,
            asked_to_listen: false,
        };
        acq.send_attempt(1, now);
        acq
    }

    /// The token the attempt in flight (or the won lock) carries.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The next command to send, if any; after the outcome, the undo it owes.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let t = self.transmits.pop_front()?;
        if let (Phase::Attempt { n, sent, .. }, Purpose::Attempt(m)) = (&mut self.phase, t.purpose)
        {
            if *n == m {
                sent[t.node] = true;
            }
        }
        Some(t)
    }

    /// The next thing to report.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The instant it must be woken at ([`handle_timeout`](Self::handle_timeout)); `None` once decided.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let wait = self
            .bounds
            .wait_bounds_attempts
            .then_some(self.bounds.wait_until);
        let own = match &self.phase {
            Phase::Attempt { started, .. } => Some(*started + self.plan.node_timeout),
            Phase::Undo { deadline, .. } => Some(*deadline),
            Phase::Pause { until, .. } => Some(*until),
            Phase::Done => return None,
        };
        match (own, wait) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The outcome, once (later calls: `None`).
    pub fn outcome(&mut self) -> Option<Outcome> {
        self.outcome.take()
    }

    /// Whether it has come to its outcome (taken or not).
    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }

    /// The driver now hears release notices for the key: a wait after an
    /// attempt sent from now on ends at the holder's release.
    pub fn listening(&mut self) {
        self.listening = true;
    }

    /// Node `node`'s reply to `purpose` at `now`. Replies to what it no longer
    /// waits for (late, or after the outcome) only report a node's fault.
    pub fn handle_reply(&mut self, node: usize, purpose: Purpose, reply: Answer, now: Instant) {
        match (&mut self.phase, purpose) {
            (Phase::Attempt { n, out, .. }, Purpose::Attempt(m))
                if *n == m && out.get(node).copied().unwrap_or(false) =>
            {
                out[node] = false;
                self.attempt_answer(node, reply, now);
            }
            (Phase::Undo { n, out, .. }, Purpose::Undo(m))
                if *n == m && out.get(node).copied().unwrap_or(false) =>
            {
                out[node] = false;
                let answer = super::release::answer(reply, self.plan.keys.len());
                self.fault(node, answer);
                if self.undo_landed() {
                    self.pause(now);
                }
            }
            _ => {
                let answer = match (purpose, reply) {
                    (_, Err(answer)) => answer,
                    (Purpose::Undo(_), Ok(r)) => {
                        super::release::answer(Ok(r), self.plan.keys.len())
                    }
                    (Purpose::Attempt(_), Ok(r)) => super::acquire::answer(Ok(r)).0,
                };
                self.fault(node, answer);
            }
        }
    }

    /// The time is `now`: whatever came due (a node's bound, the pause, the wait) happens.
    pub fn handle_timeout(&mut self, now: Instant) {
        let wait_over = self.bounds.wait_bounds_attempts && now >= self.bounds.wait_until;
        match &mut self.phase {
            Phase::Attempt { started, out, .. } => {
                if wait_over {
                    let n = self.attempts();
                    let failure = wait_passed(
                        self.last_failure.take(),
                        &self.plan.label,
                        n,
                        self.plan.wait_timeout,
                    );
                    self.fail_undoing_all(failure);
                    return;
                }
                if now < *started + self.plan.node_timeout {
                    return;
                }
                let late: Vec<usize> = (0..out.len()).filter(|&i| out[i]).collect();
                for i in late {
                    if let Phase::Attempt { out, .. } = &mut self.phase {
                        out[i] = false;
                    }
                    self.attempt_answer(i, Err(NodeAnswer::Timeout), now);
                }
            }
            Phase::Undo { deadline, out, .. } => {
                if wait_over {
                    self.time_out();
                    return;
                }
                if now < *deadline {
                    return;
                }
                for (i, o) in out.iter_mut().enumerate() {
                    if std::mem::take(o) {
                        self.events.push_back(Event::Fault {
                            node: i,
                            answer: NodeAnswer::Timeout,
                        });
                    }
                }
                self.pause(now);
            }
            Phase::Pause { n, until } => {
                if now < *until {
                    return;
                }
                let n = *n;
                if now >= self.bounds.wait_until && self.bounds.wait_bounds_attempts {
                    self.time_out();
                } else {
                    self.send_attempt(n + 1, now);
                }
            }
            Phase::Done => {}
        }
    }

    /// The holder's release notice for the key arrived at `now`: a pause ends.
    pub fn handle_notice(&mut self, now: Instant) {
        if let Phase::Pause { n, .. } = self.phase {
            self.events.push_back(Event::Woken);
            self.send_attempt(n + 1, now);
        }
    }

    /// The caller stops waiting: the outcome is the typed failure, and an
    /// attempt in flight is undone on every node it went to.
    pub fn cancel(&mut self, why: Cancel) {
        if matches!(self.phase, Phase::Done) {
            return;
        }
        let failure = match why {
            Cancel::Aborted => aborted(&self.plan.label, self.attempts()),
            Cancel::Closed => LockError::closed(),
        };
        self.fail_undoing_all(failure);
    }
}
