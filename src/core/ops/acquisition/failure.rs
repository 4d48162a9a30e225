//! The errors an acquisition ends with: taken, aborted, timed out behind
//! earlier callers, or the wait passed (keeping an outage's own code).

use std::time::Duration;

use crate::core::error::{ErrorCode, LockError, NodeAnswer, NodeReport};
use crate::core::quorum::{self, Acquired, Tally};

pub(crate) fn taken_message(label: &str, longest_pttl: Option<u64>, attempts: u32) -> String {
    match longest_pttl {
        Some(ms) => format!(
            "lock \"{label}\" is held by another owner for another {ms} ms ({attempts} attempt(s))"
        ),
        None => format!("lock \"{label}\" is held by another owner ({attempts} attempt(s))"),
    }
}

pub(crate) fn aborted(label: &str, attempts: u32) -> LockError {
    LockError::new(
        ErrorCode::Aborted,
        format!("acquiring lock \"{label}\" was aborted"),
    )
    .with_key(label)
    .with_attempts(attempts)
}

/// The wait ended while earlier callers of this client were ahead of this one.
pub(crate) fn behind_earlier(label: &str, wait: Duration) -> LockError {
    LockError::new(
        ErrorCode::Timeout,
        format!(
            "waitTimeout of {} ms passed while earlier callers of this client waited for lock \"{label}\" ahead of this one",
            wait.as_millis()
        ),
    )
    .with_key(label)
    .with_attempts(0)
}

/// The wait ended while an attempt was in flight.
pub(crate) fn wait_passed(
    last: Option<LockError>,
    label: &str,
    attempts: u32,
    wait: Duration,
) -> LockError {
    match last {
        Some(mut last) => {
            if last.code == ErrorCode::Taken {
                // Counted again: the attempt in flight is one more.
                last.message = taken_message(label, last.remaining_ms, attempts);
            }
            timed_out(last, wait).with_attempts(attempts)
        }
        None => LockError::new(
            ErrorCode::Timeout,
            format!(
                "waitTimeout of {} ms passed before the nodes answered for lock \"{label}\"",
                wait.as_millis()
            ),
        )
        .with_key(label)
        .with_attempts(attempts),
    }
}

/// The wait ended: held by another is a timeout; an outage that outlasted the
/// wait keeps its own code (`ERR_LOCK_CONNECTION`, `ERR_LOCK_QUORUM`…) and cause.
pub(crate) fn timed_out(last: LockError, wait: Duration) -> LockError {
    LockError {
        code: match last.code {
            ErrorCode::Taken => ErrorCode::Timeout,
            code => code,
        },
        message: format!(
            "waitTimeout of {} ms passed: {}",
            wait.as_millis(),
            last.message
        ),
        ..last
    }
}

/// What attempt number `attempts` at `label` failed with: its verdict, and
/// each node's answer by name; `elapsed` of its `ttl` went by.
pub(crate) fn attempt_failed(
    verdict: Acquired,
    reports: Vec<NodeReport>,
    label: &str,
    attempts: u32,
    elapsed: Duration,
    ttl: Duration,
) -> LockError {
    let failure = match verdict {
        Acquired::Contended { longest_pttl } => {
            let mut e = LockError::new(
                ErrorCode::Taken,
                taken_message(label, longest_pttl, attempts),
            );
            e.remaining_ms = longest_pttl;
            e.with_nodes(reports)
        }
        Acquired::TooLate | Acquired::Won => LockError::new(
            ErrorCode::Timeout,
            format!(
                "lock \"{label}\" was taken too late to be of use: {} ms of its {} ms ttl went by",
                elapsed.as_millis(),
                ttl.as_millis()
            ),
        )
        .with_nodes(reports),
        Acquired::NoQuorum => {
            let answers: Vec<NodeAnswer> = reports.iter().map(|r| r.answer.clone()).collect();
            let t = Tally::of(&answers);
            let detail: Vec<String> = reports
                .iter()
                .map(|r| format!("{} {}", r.node, r.answer))
                .collect();
            let message = format!(
                "lock \"{label}\": {} of {} nodes agreed, {} needed ({})",
                t.ok,
                answers.len(),
                t.needed(),
                detail.join("; ")
            );
            quorum::no_quorum(reports, || message)
        }
    };
    failure.with_key(label).with_attempts(attempts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_lock_says_for_how_long_when_known() {
        assert_eq!(
            taken_message("k", Some(40), 2),
            "lock \"k\" is held by another owner for another 40 ms (2 attempt(s))"
        );
        assert_eq!(
            taken_message("k", None, 1),
            "lock \"k\" is held by another owner (1 attempt(s))"
        );
    }

    #[test]
    fn an_abort_names_the_key_and_its_attempts() {
        let e = aborted("a, b", 3);
        assert_eq!(e.code, ErrorCode::Aborted);
        assert_eq!(e.key.as_deref(), Some("a, b"));
        assert_eq!(e.attempts, 3);
    }

    #[test]
    fn waiting_behind_earlier_callers_is_a_timeout_without_an_attempt() {
        let e = behind_earlier("k", Duration::from_millis(250));
        assert_eq!(e.code, ErrorCode::Timeout);
        assert_eq!(e.attempts, 0);
        assert!(e.message.contains("250 ms"), "{}", e.message);
    }

    #[test]
    fn a_wait_that_ends_on_a_held_lock_is_a_timeout() {
        let taken = LockError::new(ErrorCode::Taken, "held".to_string());
        let e = timed_out(taken, Duration::from_millis(10));
        assert_eq!(e.code, ErrorCode::Timeout);
        assert_eq!(e.message, "waitTimeout of 10 ms passed: held");
    }

    #[test]
    fn an_outage_that_outlasts_the_wait_keeps_its_code() {
        let down = LockError::new(ErrorCode::Connection, "refused".to_string());
        assert_eq!(
            timed_out(down, Duration::from_millis(10)).code,
            ErrorCode::Connection
        );
    }

    #[test]
    fn a_wait_that_passes_in_flight_counts_that_attempt() {
        let mut last = LockError::new(ErrorCode::Taken, taken_message("k", Some(5), 1));
        last.remaining_ms = Some(5);
        let e = wait_passed(Some(last), "k", 2, Duration::from_millis(30));
        assert_eq!(e.code, ErrorCode::Timeout);
        assert_eq!(e.attempts, 2);
        assert!(e.message.contains("(2 attempt(s))"), "{}", e.message);
        let none = wait_passed(None, "k", 1, Duration::from_millis(30));
        assert_eq!(none.code, ErrorCode::Timeout);
        assert!(
            none.message.contains("before the nodes answered"),
            "{}",
            none.message
        );
    }
}
