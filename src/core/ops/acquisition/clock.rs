//! The acquisition's timer: the instant it must be woken at, and what
//! comes due then (a node's bound on an attempt, an undo's deadline, the end
//! of a pause, the end of the wait).

use std::time::Instant;

use super::failure::{behind_earlier, wait_passed};
use super::{Acquisition, Event, Phase, Purpose};
use crate::core::error::NodeAnswer;

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
                        self.last_failure.take(),
                        &self.plan.label,
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
                        let failure = behind_earlier(&self.plan.label, self.plan.wait_timeout);
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
                    let failure = behind_earlier(&self.plan.label, self.plan.wait_timeout);
                    self.fail(failure, &[]);
                }
            }
            Phase::Done => {}
        }
    }
}
