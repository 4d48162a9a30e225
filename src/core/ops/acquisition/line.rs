//! The acquisition in lines: the line of its client's callers for the key
//! (its turn, the release notices it hears, the first in line woken instead
//! of trying), and a fair lock's line in Redis (a hand-off to it).

use std::time::Instant;

use super::{Acquisition, Event, Handoff, Outcome, Phase, Take, Won};
use crate::core::error::NodeAnswer;

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
                let answers = vec![NodeAnswer::Ok];
                self.outcome = Some(Outcome::Won(Won {
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
