//! The acquisition's steps: sending an attempt, judging its answers, undoing
//! a lost one, pausing, and ending; and its waits in its client's line.

use std::time::Instant;

use super::decide::{self, Next};
use super::failure::{attempt_failed, timed_out, wait_passed};
use super::{Acquisition, Event, Outcome, Phase, Purpose, Transmit, Won};
use crate::core::error::{LockError, NodeAnswer, NodeReport};
use crate::core::keys::CHANNEL_PREFIX;
use crate::core::model::Answers;
use crate::core::ops::acquire::{self, Acquire};
use crate::core::ops::gather::Progress;
use crate::core::ops::release;
use crate::core::ops::reply::Answer;
use crate::core::quorum::{self, Acquired, Tally};

impl Acquisition {
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

    pub(super) fn send_attempt(&mut self, n: u32, now: Instant) {
        let nodes = self.plan.nodes.len();
        if n > 1 && nodes > 1 {
            // Redlock: a fresh value per attempt. One node keeps its token, so
            // an earlier attempt that landed without a reply still counts as ours.
            self.token = self.plan.take.token();
        }
        let call = self.plan.take.call(&self.plan, &self.token);
        for node in 0..nodes {
            self.transmits.push_back(Transmit {
                node,
                purpose: Purpose::Attempt(n),
                call: call.clone(),
            });
        }
        let record = Answers::default();
        self.heard = self.listening;
        self.phase = Phase::Attempt {
            n,
            started: now,
            op: Acquire::new(nodes, self.plan.lease, record.clone())
                .reading(self.plan.take.reader()),
            record,
            out: vec![true; nodes],
            sent: vec![false; nodes],
        };
    }

    pub(super) fn attempt_answer(&mut self, node: usize, reply: Answer, now: Instant) {
        let Phase::Attempt { n, started, op, .. } = &mut self.phase else {
            return;
        };
        let (n, started) = (*n, *started);
        let validity_from = crate::core::broken::validity_start_at(started, now);
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
        for (i, a) in answers.iter().enumerate() {
            self.fault(i, a.clone());
        }
        let lease = self.plan.lease;
        let verdict = acquire::verdict(
            &answers,
            lease.validity(validity_from, now),
            lease.min_validity,
        );
        if verdict == Acquired::Won {
            let Phase::Attempt { op, record, .. } = std::mem::replace(&mut self.phase, Phase::Done)
            else {
                return;
            };
            let out = answers
                .iter()
                .filter(|a| matches!(a, NodeAnswer::Pending))
                .count();
            self.outcome = Some(Outcome::Won(Won {
                token: self.token.clone(),
                attempts: n,
                started,
                answers,
                record,
                fence: op.fence(),
            }));
            self.won = Some((n, op, out));
            return;
        }
        let t = Tally::of(&answers);
        if t.held > 0 {
            self.events.push_back(Event::Contended);
        }
        let failure = attempt_failed(
            verdict,
            self.reports(&answers),
            &self.plan.label,
            n,
            now.saturating_duration_since(validity_from),
            self.plan.lease.ttl,
        );

        // A node that answered "held by another" provably wrote nothing, and
        // one the driver could not reach never got the command; any other may
        // hold our token.
        let to_undo: Vec<bool> = answers
            .iter()
            .map(|a| !matches!(a, NodeAnswer::Held { .. } | NodeAnswer::Unreachable(_)))
            .collect();
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
                self.last_failure = Some(failure);
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

    pub(super) fn reports(&self, answers: &[NodeAnswer]) -> Vec<NodeReport> {
        self.plan
            .nodes
            .iter()
            .zip(answers)
            .map(|(node, answer)| NodeReport {
                node: node.clone(),
                answer: answer.clone(),
            })
            .collect()
    }

    pub(super) fn queue_undo(&mut self, n: u32, nodes: &[bool]) {
        if !nodes.iter().any(|&u| u) {
            return;
        }
        let call = release::call(&self.plan.keys, &self.token, CHANNEL_PREFIX);
        for (node, _) in nodes.iter().enumerate().filter(|(_, &u)| u) {
            self.transmits.push_back(Transmit {
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
                }
            }
            None => self.time_out(),
        }
    }

    pub(super) fn time_out(&mut self) {
        let n = self.attempts();
        let failure = match self.last_failure.take() {
            Some(last) => timed_out(last, self.plan.wait_timeout),
            None => wait_passed(None, &self.plan.label, n, self.plan.wait_timeout),
        };
        self.outcome = Some(Outcome::Failed(failure));
        self.phase = Phase::Done;
    }

    /// Ends with `failure`, owing the undo of an attempt in flight on every
    /// node it went to (any of them may yet run it, answered or not).
    pub(super) fn fail_undoing_all(&mut self, failure: LockError) {
        let sent = match &self.phase {
            Phase::Attempt { sent, .. } => sent.clone(),
            _ => Vec::new(),
        };
        self.fail(failure, &sent);
    }

    pub(super) fn fail(&mut self, failure: LockError, undo: &[bool]) {
        let n = self.attempts();
        // What was not sent yet never will be.
        self.transmits.clear();
        self.queue_undo(n, undo);
        self.outcome = Some(Outcome::Failed(failure));
        self.phase = Phase::Done;
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
        self.plan.retry_count.is_none() && matches!(self.phase, Phase::Pause { .. })
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
