//! What follows an attempt that did not win, and the waits around attempts: the lost attempt
//! undone on the nodes that may hold its token, the pause before the next one (ended early by
//! the holder's release notice), the line of its client's callers and a fair lock's line in
//! Redis, its timer, and the ways it ends without the lock (the wait over, a cancel, a failure
//! not worth retrying) with the undo and the leaving it then owes.

use std::time::{Duration, Instant};

use super::decide::{self, Next};
use super::failure::{aborted, attempt_failed, behind_earlier, timed_out, wait_passed};
use super::state::{Acquisition, Flags, Phase};
use super::{Cancel, Event, Handoff, Outcome, Purpose, Take, Won};
use crate::core::error::{LockError, NodeAnswer};
use crate::core::ops::gather::Answer;
use crate::core::quorum::{self, Acquired, Tally};

/// A lost attempt: undone where it may have landed, then a pause before the next.
impl Acquisition {
    /// Attempt `n`, sent at `started`, lost with `answers` (`stray`: the
    /// nodes a Redlock semaphore's attempt wrote a slot on that no quorum
    /// granted; `elapsed`: since its validity was counted from): it is undone,
    /// then retried after a pause, or the acquisition ends without the lock.
    pub(super) fn lost(
        &mut self,
        (n, started): (u32, Instant),
        answers: &[NodeAnswer],
        verdict: Acquired,
        stray: Option<&[bool]>,
        elapsed: Duration,
        now: Instant,
    ) {
        if self.plan.take.place_ms() > 0 && matches!(answers, [NodeAnswer::Held { .. }]) {
            // In a fair line: a hand-off after this attempt is ours.
            self.in_line = Some((n, started));
        }
        let t = Tally::of(answers);
        self.split = t.ok > 0 && self.plan.nodes.len() > 1;
        if t.held > 0 {
            self.events.push_back(Event::Contended);
        }
        let failure = attempt_failed(
            verdict,
            self.plan.reports(answers),
            &self.plan.label(),
            n,
            elapsed,
            self.plan.lease.ttl,
        );

        let to_undo = decide::to_undo(answers, stray);
        match decide::next(
            verdict,
            quorum::worth_retrying(answers),
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

    /// A reply to what it no longer waits for an attempt's answer on: an
    /// undo's (the pause follows once every undo landed), the won attempt's
    /// late answer, or one that only reports a node's fault.
    pub(super) fn handle_other_reply(
        &mut self,
        node: usize,
        purpose: Purpose,
        reply: Answer,
        now: Instant,
    ) {
        match (&mut self.phase, purpose) {
            (Phase::Undo { n, out, .. }, Purpose::Undo(m))
                if *n == m && out.get(node).copied().unwrap_or(false) =>
            {
                out[node] = false;
                let answer = self.plan.take.undo_answer(reply, self.plan.keys.len());
                self.fault(node, &answer);
                if self.undo_landed() {
                    self.pause(now);
                }
            }
            _ => self
                .late
                .hear(&self.plan, (node, purpose), reply, now, &mut self.events),
        }
    }

    pub(super) fn queue_undo(&mut self, n: u32, nodes: &[bool]) {
        self.queue_undo_but(n, nodes, "");
    }

    /// The undo of attempt `n` on `nodes`, but the member `keep` (see [`Take::undo_call`]).
    pub(super) fn queue_undo_but(&mut self, n: u32, nodes: &[bool], keep: &str) {
        if !nodes.iter().any(|&u| u) {
            return;
        }
        let call = self.plan.take.undo_call(&self.plan, &self.token, keep);
        let to = (0..nodes.len()).filter(|&i| nodes[i]);
        self.queue(to, Purpose::Undo(n), call);
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
}

/// Waiting in the line of its client's callers for the key (its turn, the
/// release notices it hears, the first in line woken instead of trying), and
/// in a fair lock's line in Redis.
impl Acquisition {
    /// Its turn came at `now` behind earlier callers that already wait in
    /// the key's line: it joins the line behind them ([`Event::Listen`]) and
    /// pauses until a notice or its timer.
    pub(super) fn join_behind(&mut self, now: Instant) {
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
            if decide::handoff_holds(h, m, since, &self.plan.lease, now) {
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

/// Ending without the lock, and its timer (a node's bound, the pause, the wait).
impl Acquisition {
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

    /// The wait is over, nothing in flight: it ends with the last attempt's failure.
    pub(super) fn time_out(&mut self) {
        let wait = self.plan.wait_timeout;
        let failure = match self.last_failure.take() {
            Some(last) => timed_out(*last, wait),
            None => wait_passed(None, &self.plan.label(), self.attempts(), wait),
        };
        self.end(failure);
    }

    /// Ending after attempt `n` without the lock: a place in a fair line is given up.
    fn leave_line(&mut self, n: u32) {
        let Some(call) = (n > 0)
            .then(|| self.plan.take.leave_call(&self.plan, &self.token))
            .flatten()
        else {
            return;
        };
        self.queue(0..self.plan.nodes.len(), Purpose::Leave(n), call);
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
        self.end(failure);
    }

    /// Ends with `failure`, leaving a fair line it took a place in.
    fn end(&mut self, failure: LockError) {
        self.leave_line(self.attempts());
        self.outcome = Some(Outcome::Failed(failure));
        self.phase = Phase::Done;
    }

    /// The time is `now`: whatever came due (a node's bound, the pause, the wait) happens.
    pub fn handle_timeout(&mut self, now: Instant) {
        let wait_over = self.bounds.wait_bounds_attempts && now >= self.bounds.wait_until;
        match &mut self.phase {
            Phase::Attempt { started, .. } => {
                if wait_over {
                    let (last, wait) = (self.last_failure.take(), self.plan.wait_timeout);
                    let failure =
                        wait_passed(last.map(|l| *l), &self.plan.label(), self.attempts(), wait);
                    return self.fail_undoing_all(failure);
                }
                if now < *started + self.plan.attempt_bound() {
                    return;
                }
                let Some((purpose, late)) = self.phase.expire() else {
                    return;
                };
                let late = (0..late.len()).filter(|&i| late[i]);
                self.late.expired.extend(late.clone().map(|i| (purpose, i)));
                for i in late {
                    self.attempt_answer(i, Err(NodeAnswer::Timeout), now);
                }
            }
            Phase::Undo { deadline, .. } => {
                if wait_over {
                    return self.time_out();
                }
                if now < *deadline {
                    return;
                }
                if let Some((purpose, late)) = self.phase.expire() {
                    for i in (0..late.len()).filter(|&i| late[i]) {
                        self.late.expired.push((purpose, i));
                        let answer = NodeAnswer::Timeout;
                        self.events.push_back(Event::Fault { node: i, answer });
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
