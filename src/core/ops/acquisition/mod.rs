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
//! Here: an acquisition from its start to a won attempt (the questions it answers, an attempt
//! sent and its answers judged); `plan.rs` what it is given and sends, one attempt decided at
//! quorum; `waits.rs` what follows a lost attempt (its undo, the pause, the lines it waits in,
//! its timer, the ways it ends without the lock); `state.rs` what it is in between, reports and
//! ends with, and what it still hears after; `decide.rs`, `failure.rs` what follows a verdict.

pub mod decide;
pub mod failure;
pub(crate) mod plan;
mod state;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_fair;
#[cfg(test)]
mod tests_slots;
mod waits;

pub use plan::{Acquire, LeaseTerms, Plan, Purpose, ReadReply, Take, Transmit};
pub use state::Acquisition;
pub use state::{Cancel, Event, Handoff, Outcome, Won};

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use self::plan::verdict;
use self::state::{Phase, Stragglers};
use super::call::Call;
use super::gather::{Answer, Progress};
use super::permits;
use crate::core::base::ms_of;
use crate::core::error::NodeAnswer;
use crate::core::model::{Keys, Token};
use crate::core::quorum::slots::read_slots;
use crate::core::quorum::Acquired;

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
            in_line: None,
            late: Stragglers {
                won: None,
                expired: Vec::new(),
            },
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

    pub(super) fn jitter(&mut self) -> Duration {
        Duration::from_millis(self.rng.random_range(0..=ms_of(self.plan.retry_jitter)))
    }

    pub(super) fn fault(&mut self, node: usize, answer: &NodeAnswer) {
        if answer.is_fault() {
            let answer = answer.clone();
            self.events.push_back(Event::Fault { node, answer });
        }
    }

    /// `call` to go to each of `to` for `why` (the last one takes the call itself).
    pub(super) fn queue(
        &mut self,
        to: impl Iterator<Item = usize>,
        why: Purpose,
        call: Call<'static>,
    ) {
        let mut to = to.peekable();
        while let Some(node) = to.next() {
            let call = match to.peek() {
                Some(_) => call.clone(),
                None => return self.transmits.push(Transmit::new(node, why, call)),
            };
            self.transmits.push(Transmit::new(node, why, call));
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
        self.late.won.as_deref().is_none_or(|(_, _, out)| *out == 0)
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
            _ => self.handle_other_reply(node, purpose, reply, now),
        }
    }

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
        self.join_behind(now);
    }

    pub(super) fn send_attempt(&mut self, n: u32, now: Instant) {
        let nodes = self.plan.nodes.len();
        if n > 1 && nodes > 1 {
            // Redlock: a fresh value per attempt. One node keeps its token, so
            // an earlier attempt that landed without a reply still counts as ours.
            self.token = self.plan.take.token();
        }
        let slots = match self.plan.take.permits() {
            Some(p) if matches!(self.plan.take, Take::Slots { .. }) => Some(p.limit.max(1)),
            _ => None,
        };
        // Concurrent attempts start at different slots, so they rarely want the same ones.
        let first = slots.map_or(0, |limit| self.rng.random_range(0..limit));
        let call = self.plan.take.call(&self.plan, &self.token, n, first);
        self.queue(0..nodes, Purpose::Attempt(n), call);
        self.heard = self.listening;
        let mut op = Acquire::new(nodes, self.plan.lease).reading(self.plan.take.reader());
        if slots.is_some() {
            op = op.waiting_for_all();
        }
        self.phase = Phase::Attempt {
            n,
            started: now,
            op,
            out: smallvec::smallvec![true; nodes],
            sent: smallvec::smallvec![false; nodes],
            slots: if slots.is_some() {
                vec![None; nodes]
            } else {
                Vec::new()
            },
        };
    }

    pub(super) fn attempt_answer(&mut self, node: usize, reply: Answer, now: Instant) {
        let Phase::Attempt {
            n,
            started,
            op,
            slots,
            ..
        } = &mut self.phase
        else {
            return;
        };
        let (n, started) = (*n, *started);
        if let Some(slot) = slots.get_mut(node) {
            *slot = Some(permits::slots(reply.clone()));
        }
        let validity_from = if cfg!(feature = "broken-modes") {
            crate::core::broken::validity_start_at(started, now)
        } else {
            started
        };
        let answers = match op.on_reply(node, reply, validity_from, now) {
            Progress::Waiting => return,
            Progress::Late { node, fault, .. } => {
                if let Some(answer) = fault {
                    self.events.push_back(Event::Fault { node, answer });
                }
                return;
            }
            Progress::Decided(answers) => answers,
        };
        // A Redlock semaphore's: what counts is the member a quorum granted.
        let (answers, member, stray) = match &self.phase {
            Phase::Attempt { slots, .. } if !slots.is_empty() => {
                let (v, elsewhere) = read_slots(slots);
                (v.answers.into(), v.member, Some((v.stray, elsewhere)))
            }
            _ => (answers, None, None),
        };
        for (i, a) in answers.iter().enumerate() {
            self.fault(i, a);
        }
        let lease = self.plan.lease;
        let verdict = verdict(
            &answers,
            lease.validity(validity_from, now),
            lease.min_validity,
        );
        if verdict == Acquired::Won {
            let Phase::Attempt { op, sent, .. } = std::mem::replace(&mut self.phase, Phase::Done)
            else {
                return;
            };
            let out = answers
                .iter()
                .filter(|a| matches!(a, NodeAnswer::Pending))
                .count();
            let token = match (&member, &stray) {
                (Some(member), Some((_, elsewhere))) => {
                    // What else this attempt wrote (other slots, a node that
                    // did not answer in time) is not the holder's: freed now.
                    let undo: Vec<bool> =
                        (0..sent.len()).map(|i| sent[i] && elsewhere[i]).collect();
                    self.queue_undo_but(n, &undo, member);
                    Token::from(member.as_str())
                }
                // Nothing still out: the machine is done with it.
                _ if out == 0 => std::mem::take(&mut self.token),
                _ => self.token.clone(),
            };
            self.outcome = Some(Outcome::Won(Won {
                keys: self.won_keys(out),
                token,
                attempts: n,
                started,
                answers,
                fence: op.fence(),
            }));
            self.late.won = (out > 0).then(|| Box::new((n, op, out)));
            return;
        }
        let elapsed = now.saturating_duration_since(validity_from);
        let stray = stray.as_ref().map(|(s, _)| s.as_slice());
        self.lost((n, started), &answers, verdict, stray, elapsed, now);
    }
}

/// When it must be woken (what comes due then: `handle_timeout`, in `waits.rs`).
impl Acquisition {
    /// The instant it must be woken at ([`handle_timeout`](Self::handle_timeout)); `None` once decided.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let wait = self
            .bounds
            .wait_bounds_attempts
            .then_some(self.bounds.wait_until);
        let own = match &self.phase {
            Phase::Attempt { started, .. } => Some(*started + self.plan.attempt_bound()),
            Phase::Undo { deadline, .. } => Some(*deadline),
            Phase::Pause { until, .. } => Some(*until),
            Phase::Turn => None,
            Phase::Done => return None,
        };
        match (own, wait) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// When its own bound on the commands it has out falls (an attempt's
    /// node timeout, an undo's deadline): a driver whose transport answers
    /// each command by that bound anyway needs no timer for this instant.
    pub fn commands_due(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Attempt { started, .. } => Some(*started + self.plan.attempt_bound()),
            Phase::Undo { deadline, .. } => Some(*deadline),
            _ => None,
        }
    }
}
