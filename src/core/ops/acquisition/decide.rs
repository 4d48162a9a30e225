//! The acquire loop's decisions after an attempt that did not win, pure:
//! give up (with the attempt's failure, or as a timeout once the wait is
//! over), or retry after how long a pause. The time (`now`) and the jitter
//! drawn are arguments. And how an attempt is undone, and a fair line
//! left, for each kind.

use std::time::{Duration, Instant};

use super::{Handoff, LeaseTerms, Plan, Take};
use crate::core::error::NodeAnswer;
use crate::core::ops::call::Call;
use crate::core::ops::gather::Answer;
use crate::core::ops::{permits, release};
use crate::core::quorum::Acquired;

/// The caller's bounds on retrying.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub retry_delay: Duration,
    pub retry_count: Option<u32>,
    pub wait_until: Instant,
    /// `waitTimeout` 0 asks for one attempt with no waiting.
    pub wait_bounds_attempts: bool,
}

/// The nodes an attempt that did not win is undone on: a node that
/// answered "held by another" provably wrote nothing, and one the driver
/// could not reach never got the command; any other may hold its token, and
/// so may one that `wrote` though it answered held (a Redlock semaphore's
/// node that granted other slots than the most granted ones).
pub(crate) fn to_undo(answers: &[NodeAnswer], wrote: Option<&[bool]>) -> super::state::Flags {
    let held = |a: &NodeAnswer| matches!(a, NodeAnswer::Held { .. } | NodeAnswer::Unreachable(_));
    let wrote = |i: usize| wrote.is_some_and(|w| w.get(i).copied().unwrap_or(false));
    answers
        .iter()
        .enumerate()
        .map(|(i, a)| wrote(i) || !held(a))
        .collect()
}

/// What follows an attempt that did not win.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Give up with the attempt's own failure.
    GiveUp,
    /// The wait is over: give up with the failure as a timeout.
    TimedOut,
    /// Undo the attempt, pause, and try again.
    Retry,
}

/// After attempt number `attempts` came to `verdict` at `now`: contention is
/// waited out, and so is an outage (`worth_retrying`: nodes unreachable,
/// loading, read-only after a failover), within the same budget.
pub(crate) fn next(
    verdict: Acquired,
    worth_retrying: bool,
    attempts: u32,
    b: &Bounds,
    now: Instant,
) -> Next {
    let contended = matches!(verdict, Acquired::Contended { .. });
    let outage = verdict == Acquired::NoQuorum && b.wait_bounds_attempts && worth_retrying;
    let retries_left = b.retry_count.is_none_or(|r| attempts <= r);
    if !(contended || outage) || !retries_left {
        Next::GiveUp
    } else if now >= b.wait_until {
        Next::TimedOut
    } else {
        Next::Retry
    }
}

/// The pause before the next attempt, once the undo landed at `now`
/// (`None`: the wait is over). `longest_pttl`: the holder's lease left;
/// `heard`: its release notice will wake us.
pub(crate) fn pause(
    longest_pttl: Option<u64>,
    heard: bool,
    jitter: Duration,
    b: &Bounds,
    now: Instant,
) -> Option<Duration> {
    if now >= b.wait_until {
        return None;
    }
    let mut pause = b.retry_delay + jitter;
    if let Some(ms) = longest_pttl {
        let lease_end = Duration::from_millis(ms.saturating_add(1));
        // A caller that gave retryCount bounds every pause by retryDelay + jitter.
        pause = if heard && b.retry_count.is_none() {
            // Its release wakes us: no polling, only a bound for a holder
            // that vanished (or a notice lost to a cut) at its lease's end.
            lease_end + jitter
        } else {
            // The holder's lease ends sooner than our pause: try right after it.
            pause.min(lease_end)
        };
    }
    Some(pause.min(b.wait_until - now))
}

/// Whether a fair lock's hand-off `h`, heard at `now`, makes the waiter the
/// holder: it came after `m`, the waiter's last attempt that found it waiting
/// (sent at `since`; a later one makes the hand-off stale), the fence is
/// there when fencing asks for one, and at least half the lease is left.
pub(crate) fn handoff_holds(
    h: Handoff,
    m: u32,
    since: Instant,
    lease: &LeaseTerms,
    now: Instant,
) -> bool {
    let current =
        h.after != 0 && (h.after == u64::from(m) || crate::core::broken::trusts_stale_handoffs());
    let fenced = !lease.fencing || h.fence.is_some();
    current && fenced && lease.validity(since, now) >= lease.min_validity.max(lease.ttl / 2)
}

/// How an attempt is undone, and a fair line left.
impl Take {
    /// How a node's reply to an undo reads.
    pub(super) fn undo_answer(&self, reply: Answer, keys: usize) -> NodeAnswer {
        match self {
            Take::Fair { .. } => permits::fair_released(reply),
            Take::Slots { .. } => permits::slots_undone(reply),
            _ => release::answer(reply, keys),
        }
    }

    /// The undo of attempt `token` (a fair lock's hands on a key it took),
    /// but the member `keep` (a Redlock semaphore's slots: the ones it won
    /// with, when it won).
    pub(super) fn undo_call(&self, plan: &Plan, token: &str, keep: &str) -> Call<'static> {
        match self {
            Take::Fair { .. } => {
                permits::fair_release_call(&plan.keys[0], token, plan.channel, false)
            }
            Take::Slots { .. } => {
                permits::slots_undo_call(&plan.keys[0], token, keep, plan.channel)
            }
            _ => release::call(&plan.keys, token, plan.channel),
        }
    }

    /// Whether leaving its line also undoes an attempt (a fair lock's leave
    /// hands on a key its attempt took).
    pub(super) fn leave_undoes(&self) -> bool {
        matches!(self, Take::Fair { place_ms, .. } if *place_ms > 0)
    }

    /// Leaving a fair line for good, once an attempt took a place in it (a
    /// fair lock's also hands on a key its attempt took); `None` for others.
    pub(super) fn leave_call(&self, plan: &Plan, token: &str) -> Option<Call<'static>> {
        match self {
            Take::Fair { place_ms, .. } if *place_ms > 0 => Some(permits::fair_release_call(
                &plan.keys[0],
                token,
                plan.channel,
                true,
            )),
            Take::FairPermits { place_ms, .. } if *place_ms > 0 => {
                Some(permits::leave_call(&plan.keys[0], token))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn bounds(t0: Instant, retry_count: Option<u32>, wait: u64) -> Bounds {
        Bounds {
            retry_delay: ms(200),
            retry_count,
            wait_until: t0 + ms(wait),
            wait_bounds_attempts: wait > 0,
        }
    }

    const HELD: Acquired = Acquired::Contended {
        longest_pttl: Some(50),
    };

    #[test]
    fn contention_is_retried_within_the_wait() {
        let t0 = Instant::now();
        let b = bounds(t0, None, 1_000);
        assert_eq!(next(HELD, false, 1, &b, t0 + ms(10)), Next::Retry);
        assert_eq!(next(HELD, false, 9, &b, t0 + ms(1_000)), Next::TimedOut);
    }

    #[test]
    fn retry_count_bounds_the_attempts() {
        let t0 = Instant::now();
        let none = bounds(t0, Some(0), 1_000);
        assert_eq!(next(HELD, false, 1, &none, t0), Next::GiveUp);
        let two = bounds(t0, Some(2), 1_000);
        assert_eq!(next(HELD, false, 2, &two, t0), Next::Retry);
        assert_eq!(next(HELD, false, 3, &two, t0), Next::GiveUp);
    }

    #[test]
    fn an_outage_is_waited_out_only_when_worth_it_and_the_wait_allows() {
        let t0 = Instant::now();
        let b = bounds(t0, None, 1_000);
        assert_eq!(next(Acquired::NoQuorum, true, 1, &b, t0), Next::Retry);
        assert_eq!(next(Acquired::NoQuorum, false, 1, &b, t0), Next::GiveUp);
        let no_wait = bounds(t0, None, 0);
        assert_eq!(
            next(Acquired::NoQuorum, true, 1, &no_wait, t0),
            Next::GiveUp
        );
    }

    #[test]
    fn too_late_is_never_retried() {
        let t0 = Instant::now();
        let b = bounds(t0, None, 1_000);
        assert_eq!(next(Acquired::TooLate, true, 1, &b, t0), Next::GiveUp);
    }

    #[test]
    fn the_pause_is_the_retry_delay_and_jitter_without_a_holder() {
        let t0 = Instant::now();
        let b = bounds(t0, None, 1_000);
        assert_eq!(pause(None, false, ms(7), &b, t0), Some(ms(207)));
    }

    #[test]
    fn a_holder_whose_lease_ends_sooner_is_tried_right_after_it() {
        let t0 = Instant::now();
        let b = bounds(t0, None, 1_000);
        assert_eq!(pause(Some(50), false, ms(7), &b, t0), Some(ms(51)));
        assert_eq!(pause(Some(500), false, ms(7), &b, t0), Some(ms(207)));
    }

    #[test]
    fn a_heard_holder_is_waited_for_until_its_lease_ends() {
        let t0 = Instant::now();
        let b = bounds(t0, None, 10_000);
        assert_eq!(pause(Some(500), true, ms(7), &b, t0), Some(ms(508)));
        let counted = bounds(t0, Some(3), 10_000);
        assert_eq!(pause(Some(500), true, ms(7), &counted, t0), Some(ms(207)));
    }

    #[test]
    fn no_pause_outlasts_the_wait() {
        let t0 = Instant::now();
        let b = bounds(t0, None, 100);
        assert_eq!(pause(None, false, ms(7), &b, t0 + ms(40)), Some(ms(60)));
        assert_eq!(pause(None, false, ms(7), &b, t0 + ms(100)), None);
    }
}
