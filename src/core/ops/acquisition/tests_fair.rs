//! A fair line's acquisitions (a fair lock's, fair permits') fed literal
//! replies at literal instants: hand-offs, stale hand-offs, leaving the line.

use std::time::Instant;

use super::tests::{drain, events, failed, granted, ms, plan, won};
use super::*;
use crate::core::error::ErrorCode;
use crate::core::ops::scripts;
use crate::core::ops::Reply as R;

fn fair_plan(fencing: bool, wait_ms: u64) -> Plan {
    let mut p = plan(1, wait_ms, None, fencing);
    p.fences = Vec::new();
    p.take = Take::Fair {
        fence: fencing.then(|| "k:fence".to_string()),
        place_ms: 2_000,
    };
    p
}

fn fair_permits_plan() -> Plan {
    Plan {
        take: Take::FairPermits {
            permits: crate::core::model::fair(crate::core::model::rw_permits(false)),
            place_ms: 2_000,
        },
        ..plan(1, 10_000, None, false)
    }
}

/// The fair scripts' "in line" reply: the place is due for renewal within `ms`.
fn in_line(ms: i64) -> Answer {
    Ok(R::Array(vec![R::Int(0), R::Int(ms), R::Int(1)]))
}

fn runs(t: &Transmit, script: &redis::Script) -> bool {
    t.call.script.get_hash() == script.get_hash()
}

/// Attempt `n` went out and found the caller in line at `at`; it pauses.
fn waits_in_line(a: &mut Acquisition, n: u32, at: Instant) -> Transmit {
    let mut sent = drain(a);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].purpose, Purpose::Attempt(n));
    a.handle_reply(0, Purpose::Attempt(n), in_line(600), at);
    assert!(a.is_paused(), "in line, nothing to undo: it pauses");
    sent.remove(0)
}

#[test]
fn a_fair_attempt_numbers_itself_so_that_a_hand_off_can_name_it() {
    let t0 = Instant::now();
    let token = Take::Fair {
        fence: None,
        place_ms: 0,
    }
    .token();
    let mut a = Acquisition::new(fair_plan(false, 10_000), token, 1, t0);
    let first = drain(&mut a);
    assert!(runs(&first[0], &scripts::FAIR_ACQUIRE));
    let args = first[0].call.args_text();
    assert_eq!(
        args[1..],
        ["10000", "2000", "1"],
        "ttl, place lease, attempt 1"
    );
    a.handle_reply(0, Purpose::Attempt(1), in_line(600), t0 + ms(1));
    let at = a.poll_timeout().expect("a pause");
    a.handle_timeout(at);
    let second = drain(&mut a);
    assert_eq!(second[0].call.args_text()[3], "2");
    assert_eq!(
        second[0].call.args_text()[0],
        a.token(),
        "one node keeps its token"
    );
}

#[test]
fn a_fair_lock_handed_over_while_in_line_is_held_without_another_attempt() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(fair_plan(false, 10_000), "f:t".into(), 1, t0);
    waits_in_line(&mut a, 1, t0 + ms(2));
    assert!(events(&mut a).contains(&Event::Listen));
    a.handle_handoff(
        Handoff {
            after: 1,
            fence: None,
        },
        t0 + ms(300),
    );
    assert!(drain(&mut a).is_empty(), "no attempt at all");
    let w = won(&mut a);
    assert_eq!(
        (w.token.as_str(), w.started),
        ("f:t", t0),
        "valid from attempt 1"
    );
    assert_eq!(
        (w.answers.into_vec(), w.fence, w.attempts),
        (vec![NodeAnswer::Ok], 0, 1),
        "one attempt went out"
    );
}

#[test]
fn a_hand_off_a_later_attempt_found_void_only_ends_the_pause() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(fair_plan(false, 10_000), "f:t".into(), 1, t0);
    waits_in_line(&mut a, 1, t0 + ms(2));
    let at = a.poll_timeout().expect("a pause");
    a.handle_timeout(at);
    waits_in_line(&mut a, 2, at + ms(1));
    // Handed over after attempt 1, which attempt 2 found still waiting.
    a.handle_handoff(
        Handoff {
            after: 1,
            fence: None,
        },
        at + ms(5),
    );
    assert!(!a.is_done());
    let third = drain(&mut a);
    assert_eq!(third[0].purpose, Purpose::Attempt(3), "it tries instead");
    assert!(events(&mut a).contains(&Event::Woken));
    // An attempt number it never knew (0) is no hand-off it can take either.
    a.handle_reply(0, Purpose::Attempt(3), in_line(600), at + ms(6));
    a.handle_handoff(
        Handoff {
            after: 0,
            fence: None,
        },
        at + ms(7),
    );
    assert_eq!(drain(&mut a)[0].purpose, Purpose::Attempt(4));
}

#[test]
fn a_hand_off_too_late_to_leave_half_the_lease_is_tried_for_instead() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(fair_plan(false, 60_000), "f:t".into(), 1, t0);
    waits_in_line(&mut a, 1, t0 + ms(2));
    // The lease is 10 s, counted from attempt 1: 5.1 s later less than half is left.
    a.handle_handoff(
        Handoff {
            after: 1,
            fence: None,
        },
        t0 + ms(5_100),
    );
    assert_eq!(drain(&mut a)[0].purpose, Purpose::Attempt(2));
    a.handle_reply(0, Purpose::Attempt(2), granted(0), t0 + ms(5_101));
    let w = won(&mut a);
    assert_eq!((w.attempts, w.started), (2, t0 + ms(5_100)));
}

#[test]
fn with_fencing_a_hand_off_is_taken_only_with_its_fence() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(fair_plan(true, 10_000), "f:t".into(), 1, t0);
    let first = waits_in_line(&mut a, 1, t0 + ms(2));
    assert_eq!(first.call.args_text().len(), 4);
    a.handle_handoff(
        Handoff {
            after: 1,
            fence: None,
        },
        t0 + ms(3),
    );
    // The next attempt finds the key holding its token and reads the counter.
    assert_eq!(drain(&mut a)[0].purpose, Purpose::Attempt(2));
    a.handle_reply(0, Purpose::Attempt(2), in_line(600), t0 + ms(4));
    a.handle_handoff(
        Handoff {
            after: 2,
            fence: Some(41),
        },
        t0 + ms(5),
    );
    let w = won(&mut a);
    assert_eq!((w.fence, w.started), (41, t0 + ms(3)));
}

#[test]
fn a_fair_lock_that_stops_waiting_leaves_the_line_handing_on_what_it_took() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(fair_plan(false, 1_000), "f:t".into(), 1, t0);
    waits_in_line(&mut a, 1, t0 + ms(2));
    loop {
        let at = a.poll_timeout().expect("bounded by its wait");
        a.handle_timeout(at);
        if a.is_done() {
            break;
        }
        for t in drain(&mut a) {
            a.handle_reply(0, t.purpose, in_line(600), at + ms(1));
        }
    }
    assert_eq!(failed(&mut a).code, ErrorCode::Timeout);
    let owed = drain(&mut a);
    assert_eq!(owed.len(), 1, "{owed:?}");
    assert!(matches!(owed[0].purpose, Purpose::Leave(_)));
    assert!(runs(&owed[0], &scripts::FAIR_RELEASE));
    assert_eq!(
        owed[0].call.args_text(),
        ["f:t", "__lockdog:released:", "1"]
    );

    // Aborted with its attempt out: the leave also stands for its undo.
    let mut b = Acquisition::new(fair_plan(false, 10_000), "f:u".into(), 1, t0);
    drain(&mut b);
    b.cancel(Cancel::Aborted);
    let owed = drain(&mut b);
    assert_eq!(owed.len(), 1);
    assert_eq!(owed[0].purpose, Purpose::Leave(1));
    assert_eq!(failed(&mut b).code, ErrorCode::Aborted);
    b.handle_reply(0, Purpose::Leave(1), Ok(R::Int(0)), t0 + ms(1));
    b.handle_reply(0, Purpose::Attempt(1), in_line(600), t0 + ms(1));
    assert!(events(&mut b).is_empty(), "late answers that are no fault");
}

#[test]
fn one_attempt_takes_no_place_and_owes_only_its_undo() {
    let t0 = Instant::now();
    let mut p = fair_plan(false, 0);
    p.take = Take::Fair {
        fence: None,
        place_ms: 0,
    };
    let mut a = Acquisition::new(p, "f:t".into(), 1, t0);
    let first = drain(&mut a);
    assert_eq!(first[0].call.args_text()[2..], ["0", "0"]);
    a.handle_reply(0, Purpose::Attempt(1), Err(NodeAnswer::Timeout), t0 + ms(1));
    assert!(a.is_done());
    let owed = drain(&mut a);
    assert_eq!(owed.len(), 1);
    assert_eq!(owed[0].purpose, Purpose::Undo(1));
    assert!(runs(&owed[0], &scripts::FAIR_RELEASE));
    assert_eq!(owed[0].call.args_text()[2], "0", "a release, not a leave");
}

#[test]
fn fair_permits_undo_their_attempt_then_leave_the_line() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(fair_permits_plan(), "1:u".into(), 1, t0);
    let first = drain(&mut a);
    assert!(runs(&first[0], &scripts::FAIR_SEM_ACQUIRE));
    a.handle_reply(0, Purpose::Attempt(1), in_line(600), t0 + ms(1));
    // A hand-off is a fair lock's: permits only end their pause.
    a.handle_handoff(
        Handoff {
            after: 1,
            fence: None,
        },
        t0 + ms(2),
    );
    assert_eq!(drain(&mut a)[0].purpose, Purpose::Attempt(2));
    a.cancel(Cancel::Aborted);
    let owed = drain(&mut a);
    assert_eq!(
        owed.iter().map(|t| t.purpose).collect::<Vec<_>>(),
        [Purpose::Undo(2), Purpose::Leave(2)]
    );
    assert!(runs(&owed[0], &scripts::RELEASE));
    assert!(runs(&owed[1], &scripts::FAIR_LEAVE));
    assert_eq!(owed[1].call.args_text(), ["1:u"]);
}
