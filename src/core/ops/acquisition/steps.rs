//! The acquisition's steps: sending an attempt, judging its answers, undoing a lost one, pausing,
//! and ending; and its waits in its client's line.

use std::time::Instant;

use rand::Rng;

use super::decide::{self, Next};
use super::failure::{attempt_failed, behind_earlier, timed_out, wait_passed};
use super::plan::{verdict, Acquire};
use super::state::{Acquisition, Flags, Phase};
use super::{Event, Outcome, Purpose, Take, Transmit, Won};
use crate::core::error::{LockError, NodeAnswer};
use crate::core::model::Token;
use crate::core::ops::gather::Answer;
use crate::core::ops::gather::Progress;
use crate::core::ops::permits;
use crate::core::quorum::slots::read_slots;
use crate::core::quorum::{self, Acquired, Tally};

impl Acquisition {
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
        let mut call = Some(self.plan.take.call(&self.plan, &self.token, n, first));
        for node in 0..nodes {
            // The last node takes the call itself.
            let call = match node + 1 == nodes {
                true => call.take(),
                false => call.clone(),
            };
            if let Some(call) = call {
                self.transmits.push(Transmit {
                    node,
                    purpose: Purpose::Attempt(n),
                    call,
                });
            }
        }
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
            self.fault(i, a.clone());
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
            self.won = (out > 0).then(|| Box::new((n, op, out)));
            return;
        }
        if self.plan.take.place_ms() > 0 && matches!(answers.as_slice(), [NodeAnswer::Held { .. }])
        {
            // In a fair line: a hand-off after this attempt is ours.
            self.in_line = Some((n, started));
        }
        let t = Tally::of(&answers);
        self.split = t.ok > 0 && self.plan.nodes.len() > 1;
        if t.held > 0 {
            self.events.push_back(Event::Contended);
        }
        let failure = attempt_failed(
            verdict,
            self.plan.reports(&answers),
            &self.plan.label(),
            n,
            now.saturating_duration_since(validity_from),
            self.plan.lease.ttl,
        );

        let to_undo = decide::to_undo(&answers, stray.as_ref().map(|(s, _)| s.as_slice()));
        match decide::next(
            verdict,
            quorum::worth_retrying(&answers),
            n,
            &self.bounds,
            now,
        ) {
            Next::GiveUp => self.fail(failure, &to_undo),
            Next::TimedOut => self.fail(timed_out(failure, self.plan.wait_timeout), &to_undo),
            Next::Retry => {
                let contended = matches!(verdict, Acquired::Contended { .. });
                if contended && self.plan.notices && !self.asked_to_listen {
                    self.asked_to_listen = true;
                    self.events.push_back(Event::Listen);
                } else if !(contended && self.plan.notices) {
                    // Not waiting in the key's line: callers behind may try.
                    self.events.push_back(Event::Answered);
                }
                self.last_failure = Some(Box::new(failure));
                self.queue_undo(n, &to_undo);
                self.phase = Phase::Undo {
                    n,
                    out: to_undo,
                    deadline: now + self.plan.node_timeout,
                    longest_pttl: t.longest_pttl,
                };
                if self.undo_landed() {
                    self.pause(now);
                }
            }
        }
    }

    pub(super) fn queue_undo(&mut self, n: u32, nodes: &[bool]) {
        self.queue_undo_but(n, nodes, "");
    }

    /// The undo of attempt `n` on `nodes`, but the member `keep` (see [`Take::undo_call`]).
    fn queue_undo_but(&mut self, n: u32, nodes: &[bool], keep: &str) {
        if !nodes.iter().any(|&u| u) {
            return;
        }
        let call = self.plan.take.undo_call(&self.plan, &self.token, keep);
        for (node, _) in nodes.iter().enumerate().filter(|(_, &u)| u) {
            self.transmits.push(Transmit {
                node,
                purpose: Purpose::Undo(n),
                call: call.clone(),
            });
        }
    }

    pub(super) fn undo_landed(&self) -> bool {
        matches!(&self.phase, Phase::Undo { out, .. } if !out.iter().any(|&o| o))
    }

    /// The undo landed at `now`: pause before the next attempt, or the wait is over.
    pub(super) fn pause(&mut self, now: Instant) {
        let Phase::Undo {
            n, longest_pttl, ..
        } = self.phase
        else {
            return;
        };
        let jitter = self.jitter();
        match decide::pause(longest_pttl, self.heard, jitter, &self.bounds, now) {
            Some(pause) => {
                self.phase = Phase::Pause {
                    n,
                    until: now + pause,
                    span: pause,
                    woken: false,
                }
            }
            None => self.time_out(),
        }
    }

    pub(super) fn time_out(&mut self) {
        let n = self.attempts();
        let failure = match self.last_failure.take() {
            Some(last) => timed_out(*last, self.plan.wait_timeout),
            None => wait_passed(None, &self.plan.label(), n, self.plan.wait_timeout),
        };
        self.leave_line(n);
        self.outcome = Some(Outcome::Failed(failure));
        self.phase = Phase::Done;
    }

    /// Ending after attempt `n` without the lock: a place in a fair line is given up.
    fn leave_line(&mut self, n: u32) {
        let Some(call) = (n > 0)
            .then(|| self.plan.take.leave_call(&self.plan, &self.token))
            .flatten()
        else {
            return;
        };
        for node in 0..self.plan.nodes.len() {
            self.transmits.push(Transmit {
                node,
                purpose: Purpose::Leave(n),
                call: call.clone(),
            });
        }
    }

    /// Ends with `failure`, owing the undo of an attempt in flight on every
    /// node it went to (any of them may yet run it, answered or not).
    pub(super) fn fail_undoing_all(&mut self, failure: LockError) {
        let sent = match &self.phase {
            Phase::Attempt { sent, .. } => sent.clone(),
            _ => Flags::new(),
        };
        self.fail(failure, &sent);
    }

    pub(super) fn fail(&mut self, failure: LockError, undo: &[bool]) {
        let n = self.attempts();
        // What was not sent yet never will be.
        self.transmits.clear();
        // In order behind the attempt on its connection, the undo first.
        if !self.plan.take.leave_undoes() {
            self.queue_undo(n, undo);
        }
        self.leave_line(n);
        self.outcome = Some(Outcome::Failed(failure));
        self.phase = Phase::Done;
    }
}

/// Its timer: the instant it must be woken at, and what comes due then (a node's bound on an
/// attempt, an undo's deadline, the end of a pause, the end of the wait).
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

    /// The time is `now`: whatever came due (a node's bound, the pause, the wait) happens.
    pub fn handle_timeout(&mut self, now: Instant) {
        let wait_over = self.bounds.wait_bounds_attempts && now >= self.bounds.wait_until;
        match &mut self.phase {
            Phase::Attempt { started, out, .. } => {
                if wait_over {
                    let n = self.attempts();
                    let failure = wait_passed(
                        self.last_failure.take().map(|last| *last),
                        &self.plan.label(),
                        n,
                        self.plan.wait_timeout,
                    );
                    self.fail_undoing_all(failure);
                    return;
                }
                if now < *started + self.plan.attempt_bound() {
                    return;
                }
                let late: Vec<usize> = (0..out.len()).filter(|&i| out[i]).collect();
                let n = self.attempts();
                self.expired
                    .extend(late.iter().map(|&i| (Purpose::Attempt(n), i)));
                for i in late {
                    if let Phase::Attempt { out, .. } = &mut self.phase {
                        out[i] = false;
                    }
                    self.attempt_answer(i, Err(NodeAnswer::Timeout), now);
                }
            }
            Phase::Undo {
                n, deadline, out, ..
            } => {
                if wait_over {
                    self.time_out();
                    return;
                }
                if now < *deadline {
                    return;
                }
                let n = *n;
                for (i, o) in out.iter_mut().enumerate() {
                    if std::mem::take(o) {
                        self.expired.push((Purpose::Undo(n), i));
                        self.events.push_back(Event::Fault {
                            node: i,
                            answer: NodeAnswer::Timeout,
                        });
                    }
                }
                self.pause(now);
            }
            Phase::Pause { n, until, .. } => {
                if now < *until {
                    return;
                }
                let n = *n;
                if now >= self.bounds.wait_until && self.bounds.wait_bounds_attempts {
                    if n == 0 {
                        let failure = behind_earlier(&self.plan.label(), self.plan.wait_timeout);
                        self.fail(failure, &[]);
                        return;
                    }
                    self.time_out();
                } else {
                    self.send_attempt(n + 1, now);
                }
            }
            Phase::Turn => {
                if wait_over {
                    let failure = behind_earlier(&self.plan.label(), self.plan.wait_timeout);
                    self.fail(failure, &[]);
                }
            }
            Phase::Done => {}
        }
    }
}
