//! An acquisition of any kind ([`Take`]: a lock's keys, a semaphore's or read-write lock's permits
//! on one key, a fair lock or fair permits in a line kept in Redis, a Redlock semaphore's numbered
//! slots) from its turn among its client's callers to its outcome, as one machine with no I/O and
//! no clock, in the manner of a sans-I/O protocol state machine: it is given the plan and `now`,
//! and then only takes events ([`handle_turn`](Acquisition::handle_turn),
//! [`handle_reply`](Acquisition::handle_reply), [`handle_timeout`](Acquisition::handle_timeout),
//! [`handle_notice`](Acquisition::handle_notice), [`cancel`](Acquisition::cancel)) and answers
//! questions ([`poll_transmit`](Acquisition::poll_transmit): what to send to which node;
//! [`poll_timeout`](Acquisition::poll_timeout): when to be woken next;
//! [`poll_event`](Acquisition::poll_event): what to report; [`outcome`](Acquisition::outcome): won,
//! or the typed failure). A driver sends what it is told, arms one timer, forwards replies and
//! notices, and decides nothing.
//!
//! The rules it runs: callers of one client for one key begin in call order (a later one behind
//! those already in the key's line joins it instead of trying); an attempt on every node, decided
//! at quorum in time (fencing waits for every node); a lost attempt is undone on the nodes that may
//! hold its token before the next attempt goes out (one node keeps its token, so an attempt that
//! landed without a reply still counts as ours; several nodes get a fresh token per attempt);
//! contention and an outage are waited out within `waitTimeout` and `retryCount`, pausing
//! `retryDelay` + jitter (from an RNG the machine owns), or until the holder's release notice once
//! notices are heard; the undo still owed when it ends is the driver's to send and forget (and, in
//! a fair line, leaving it).
//!
//! Here: the events it takes, the questions it answers, its waits in lines; `plan.rs` what it is
//! given and sends, one attempt decided at quorum; `state.rs` what it is in between, reports and
//! ends with; `steps.rs` its steps and timer; `decide.rs`, `failure.rs` what follows a verdict.

pub mod decide;
pub mod failure;
pub(crate) mod plan;
mod state;
mod steps;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_fair;
#[cfg(test)]
mod tests_slots;

pub use plan::{Acquire, LeaseTerms, Plan, Purpose, ReadReply, Take, Transmit};
pub use state::Acquisition;
pub use state::{Cancel, Event, Handoff, Outcome, Won};

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use self::failure::aborted;
use self::state::Phase;
use super::gather::Answer;
use crate::core::base::ms_of;
use crate::core::error::{LockError, NodeAnswer};
use crate::core::model::Keys;
use crate::core::model::Token;

impl Acquisition {
    /// Starts at `now` with `token` (a fresh one per attempt on several nodes
    /// comes from `uuid`); `seed` seeds the jitter. The first attempt is
    /// ready to send.
    pub fn new(plan: Plan, token: Token, seed: u64, now: Instant) -> Acquisition {
        let mut acq = Acquisition::waiting(plan, token, seed, now);
        acq.send_attempt(1, now);
        acq
    }

    /// Starts at `now` behind earlier callers of the same client that already wait for the key:
    /// no attempt yet; the first goes out when a release notice wakes it
    /// ([`handle_notice`](Self::handle_notice)) or its pause (`retryDelay` + jitter, or, once
    /// notices are heard and retries are not counted, the lease plus jitter) ends. The wait
    /// ending first fails it as behind earlier callers.
    pub fn behind(plan: Plan, token: Token, seed: u64, now: Instant) -> Acquisition {
        let mut acq = Acquisition::in_turn(plan, token, seed, now);
        acq.handle_turn(true, now);
        acq
    }

    /// Starts at `now` before its turn: earlier callers of its client for the
    /// key go first, and it begins at [`handle_turn`](Self::handle_turn). The
    /// wait ending first fails it as behind earlier callers.
    pub fn in_turn(plan: Plan, token: Token, seed: u64, now: Instant) -> Acquisition {
        let mut acq = Acquisition::waiting(plan, token, seed, now);
        acq.phase = Phase::Turn;
        acq
    }

    fn waiting(plan: Plan, token: Token, seed: u64, now: Instant) -> Acquisition {
        Acquisition {
            bounds: plan.bounds(now),
            plan,
            token,
            phase: Phase::Done,
            rng: SmallRng::seed_from_u64(seed),
            transmits: Default::default(),
            events: VecDeque::new(),
            outcome: None,
            last_failure: None,
            listening: false,
            heard: false,
            asked_to_listen: false,
            split: false,
            won: None,
            in_line: None,
            expired: Vec::new(),
        }
    }

    /// Its wait is counted from `began`, before `now` (the caller waited for
    /// its turn, or for a connection, before the machine started).
    pub fn waited_since(mut self, began: Instant) -> Acquisition {
        self.bounds.wait_until = began + self.plan.wait_timeout;
        if let Phase::Pause { until, .. } = &mut self.phase {
            *until = (*until).min(self.bounds.wait_until);
        }
        self
    }

    /// What it was asked to do.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Each node's bound on answering one command.
    pub fn node_timeout(&self) -> Duration {
        self.plan.node_timeout
    }

    /// The token the attempt in flight (or the won lock) carries.
    pub fn token(&self) -> &str {
        &self.token
    }

    pub(super) fn attempts(&self) -> u32 {
        match self.phase {
            Phase::Attempt { n, .. } | Phase::Undo { n, .. } | Phase::Pause { n, .. } => n,
            Phase::Turn | Phase::Done => 0,
        }
    }

    pub(super) fn fault(&mut self, node: usize, answer: NodeAnswer) {
        if answer.is_fault() {
            self.events.push_back(Event::Fault { node, answer });
        }
    }

    /// The next command to send, if any; after the outcome, the undo it owes.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let t = (!self.transmits.is_empty()).then(|| self.transmits.remove(0))?;
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

    /// The outcome, once (later calls: `None`).
    pub fn outcome(&mut self) -> Option<Outcome> {
        self.outcome.take()
    }

    /// Whether it has come to its outcome (taken or not).
    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }

    /// Whether it pauses before its next attempt (nothing in flight) and a
    /// notice would end the pause.
    pub fn is_paused(&self) -> bool {
        matches!(self.phase, Phase::Pause { woken: false, .. })
    }

    /// The keys, for the lock it won: moved out when nothing is still out
    /// (the machine is done with them), else a copy.
    pub(super) fn won_keys(&mut self, out: usize) -> Keys {
        match out {
            0 => std::mem::replace(&mut self.plan.keys, Keys::Many(Vec::new())),
            _ => self.plan.keys.clone(),
        }
    }

    /// No node's answer is still owed: an outcome's late answers are in.
    pub fn all_answered(&self) -> bool {
        self.won.as_deref().is_none_or(|(_, _, out)| *out == 0)
    }

    pub(super) fn jitter(&mut self) -> Duration {
        Duration::from_millis(self.rng.random_range(0..=ms_of(self.plan.retry_jitter)))
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
                let answer = self.plan.take.undo_answer(reply, self.plan.keys.len());
                self.fault(node, answer);
                if self.undo_landed() {
                    self.pause(now);
                }
            }
            (_, Purpose::Attempt(m)) if self.won.as_deref().is_some_and(|(n, _, _)| *n == m) => {
                let Some((_, op, out)) = self.won.as_deref_mut() else {
                    return;
                };
                let validity_from = now;
                if let crate::core::ops::gather::Progress::Late {
                    node,
                    answer,
                    fault,
                    ..
                } = op.on_reply(node, reply, validity_from, now)
                {
                    *out = out.saturating_sub(1);
                    if let Some(answer) = fault {
                        self.events.push_back(Event::Fault { node, answer });
                    }
                    self.events.push_back(Event::Late { node, answer });
                }
            }
            _ => {
                if matches!(reply, Err(NodeAnswer::Timeout)) {
                    if let Some(at) = self.expired.iter().position(|e| *e == (purpose, node)) {
                        self.expired.swap_remove(at);
                        return;
                    }
                }
                let answer = match (purpose, reply) {
                    (_, Err(answer)) => answer,
                    (Purpose::Undo(_), Ok(r)) => {
                        self.plan.take.undo_answer(Ok(r), self.plan.keys.len())
                    }
                    // Whether a place was left or never there, nothing to report.
                    (Purpose::Leave(_), Ok(_)) => return,
                    (Purpose::Attempt(_), Ok(r)) => (self.plan.take.reader())(Ok(r)).0,
                };
                self.fault(node, answer);
            }
        }
    }

    /// The holder's release notice for the key arrived at `now`: a pause
    /// ends, at once, or after a random part of the jitter when another
    /// waiter split its last attempt's vote (woken by one release, they
    /// would split it again in step, each undo's notice waking the others).
    pub fn handle_notice(&mut self, now: Instant) {
        let Phase::Pause {
            n, woken: false, ..
        } = self.phase
        else {
            return;
        };
        self.events.push_back(Event::Woken);
        let spread = if self.split {
            self.jitter()
        } else {
            Duration::ZERO
        };
        if spread.is_zero() {
            self.send_attempt(n + 1, now);
        } else if let Phase::Pause { until, woken, .. } = &mut self.phase {
            *until = (*until).min(now + spread);
            *woken = true;
        }
    }

    /// The caller stops waiting: the outcome is the typed failure, and an
    /// attempt in flight is undone on every node it went to.
    pub fn cancel(&mut self, why: Cancel) {
        if matches!(self.phase, Phase::Done) {
            return;
        }
        let failure = match why {
            Cancel::Aborted => aborted(&self.plan.label(), self.attempts()),
            Cancel::Closed => LockError::closed(),
        };
        self.fail_undoing_all(failure);
    }
}

/// Waiting in the line of its client's callers for the key: its turn, the
/// release notices it hears, the first in line woken instead of trying.
impl Acquisition {
    /// Whether it waits for its turn ([`in_turn`](Self::in_turn)).
    pub fn waits_for_turn(&self) -> bool {
        matches!(self.phase, Phase::Turn)
    }

    /// Its turn came at `now`: the first attempt goes out, or, `behind`
    /// earlier callers that already wait in the key's line, it joins the line
    /// behind them ([`Event::Listen`]) and pauses until a notice or its timer.
    pub fn handle_turn(&mut self, behind: bool, now: Instant) {
        if !matches!(self.phase, Phase::Turn) {
            return;
        }
        if !behind {
            self.send_attempt(1, now);
            return;
        }
        let span = self.plan.retry_delay + self.jitter();
        self.phase = Phase::Pause {
            n: 0,
            until: (now + span).min(self.bounds.wait_until),
            span,
            woken: false,
        };
        self.asked_to_listen = true;
        self.events.push_back(Event::Listen);
    }

    /// The driver now hears release notices for the key: a wait after an
    /// attempt sent from now on ends at the holder's release.
    pub fn listening(&mut self) {
        if self.listening {
            return;
        }
        self.listening = true;
        // Behind earlier callers with retries not counted: a release wakes
        // the line, so the timer is only a bound for a holder that vanished.
        let lengthen =
            matches!(self.phase, Phase::Pause { n: 0, .. }) && self.plan.retry_count.is_none();
        if lengthen {
            let longer = self.plan.lease.ttl + self.jitter();
            let wait_until = self.bounds.wait_until;
            if let Phase::Pause { until, span, .. } = &mut self.phase {
                let since = *until - *span;
                *span = longer;
                *until = (since + longer).min(wait_until);
            }
        }
    }

    /// Whether its pause may wait in the line of its client's callers for
    /// the key (retries are not counted): a timer that fires
    /// while earlier callers are ahead wakes the first of them instead
    /// ([`handle_behind`](Self::handle_behind)).
    pub fn waits_in_line(&self) -> bool {
        self.plan.retry_count.is_none() && matches!(self.phase, Phase::Pause { woken: false, .. })
    }

    /// Its pause ended at `now` while earlier callers of its client were
    /// ahead of it in line (the driver woke the first of them instead): it
    /// pauses as long again, within the wait.
    pub fn handle_behind(&mut self, now: Instant) {
        if self.bounds.wait_bounds_attempts && now >= self.bounds.wait_until {
            self.handle_timeout(now);
            return;
        }
        if let Phase::Pause { until, span, .. } = &mut self.phase {
            if now >= *until {
                *until = (now + *span).min(self.bounds.wait_until);
            }
        }
    }
}

/// A fair lock's line in Redis.
impl Acquisition {
    /// A fair lock's release handed the key to this waiter (the notice came
    /// at `now`, while it paused): it holds the lock without another
    /// attempt, its validity counted from the attempt the hand-off came
    /// after, when that is its last attempt that found it waiting (a later
    /// one makes the hand-off stale), the fence is there when fencing asks
    /// for one, and at least half the lease is left. Otherwise the notice
    /// only ends the pause: the next attempt finds the key holding its
    /// token if the hand-off still stands.
    pub fn handle_handoff(&mut self, h: Handoff, now: Instant) {
        if let (Phase::Pause { n, .. }, Take::Fair { .. }, Some((m, since))) =
            (&self.phase, &self.plan.take, self.in_line)
        {
            let lease = self.plan.lease;
            let current = h.after != 0
                && (h.after == u64::from(m) || crate::core::broken::trusts_stale_handoffs());
            let fenced = !lease.fencing || h.fence.is_some();
            let left = lease.validity(since, now);
            if current && fenced && left >= lease.min_validity.max(lease.ttl / 2) {
                let n = *n;
                self.events.push_back(Event::Woken);
                let answers = [NodeAnswer::Ok].into_iter().collect();
                self.outcome = Some(Outcome::Won(Won {
                    keys: self.won_keys(0),
                    token: self.token.clone(),
                    attempts: n,
                    started: since,
                    answers,
                    fence: h.fence.unwrap_or(0),
                }));
                self.phase = Phase::Done;
                return;
            }
        }
        self.handle_notice(now);
    }
}
