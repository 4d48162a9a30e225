//! The acquisition machine fed literal replies at literal instants.

use std::time::{Duration, Instant};

use super::*;
use crate::core::error::{ErrorCode, LockError};
use crate::core::ops::acquisition::LeaseTerms;
use crate::core::ops::Reply as R;

pub(super) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(super) fn plan(nodes: usize, wait_ms: u64, retry_count: Option<u32>, fencing: bool) -> Plan {
    Plan {
        nodes: (0..nodes)
            .map(|i| format!("127.0.0.1:{}", 7000 + i))
            .collect(),
        keys: vec!["k".to_string()].into(),
        fences: if fencing {
            vec!["k:fence".into()]
        } else {
            Vec::new()
        },
        prefix_len: 0,
        lease: LeaseTerms {
            ttl: ms(10_000),
            drift: ms(102),
            min_validity: ms(1),
            fencing,
        },
        node_timeout: ms(500),
        retry_delay: ms(100),
        retry_jitter: ms(100),
        retry_count,
        wait_timeout: ms(wait_ms),
        notices: true,
        plain_first: false,
        channel: crate::core::model::keys::CHANNEL_PREFIX,
        wait_replicas: None,
        take: Take::Lock,
    }
}

/// A read-write lock's writer on one key.
fn writer_plan(nodes: usize) -> Plan {
    let permits = crate::core::model::rw_permits(true);
    Plan {
        take: Take::Permits {
            permits,
            writer: "k:writer".into(),
            mark_ms: 400,
        },
        ..plan(nodes, 10_000, None, false)
    }
}

pub(super) fn granted(fence: i64) -> Answer {
    Ok(R::Array(vec![R::Int(1), R::Int(fence)]))
}

pub(super) fn held(pttl: i64) -> Answer {
    Ok(R::Array(vec![R::Int(0), R::Int(pttl)]))
}

pub(super) fn released() -> Answer {
    Ok(R::Int(1))
}

/// Every command it has to send now.
pub(super) fn drain(a: &mut Acquisition) -> Vec<Transmit> {
    std::iter::from_fn(|| a.poll_transmit()).collect()
}

pub(super) fn events(a: &mut Acquisition) -> Vec<Event> {
    std::iter::from_fn(|| a.poll_event()).collect()
}

pub(super) fn won(a: &mut Acquisition) -> Won {
    match a.outcome() {
        Some(Outcome::Won(w)) => w,
        Some(Outcome::Failed(e)) => panic!("failed: {e}"),
        None => panic!("not decided"),
    }
}

pub(super) fn failed(a: &mut Acquisition) -> LockError {
    match a.outcome() {
        Some(Outcome::Failed(e)) => e,
        Some(Outcome::Won(_)) => panic!("won"),
        None => panic!("not decided"),
    }
}

/// Answers every command with `reply` until it is done, waking it when it
/// asks; the number of attempts, and the instant it ended at.
fn run_to_end(a: &mut Acquisition, t0: Instant, reply: impl Fn() -> Answer) -> (u32, Instant) {
    let mut now = t0;
    let mut attempts = 0;
    while !a.is_done() {
        for t in drain(a) {
            attempts += u32::from(matches!(t.purpose, Purpose::Attempt(_)));
            a.handle_reply(t.node, t.purpose, reply(), now + ms(1));
        }
        if let Some(at) = a.poll_timeout() {
            now = at;
            a.handle_timeout(now);
        }
    }
    (attempts, now)
}

/// The script a transmit runs, by its name in the scripts table.
fn is_release(t: &Transmit) -> bool {
    std::ptr::eq(t.call.script, &*crate::core::ops::scripts::RELEASE)
}

#[test]
fn won_at_once_on_one_node() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(1, 10_000, None, false), "tok".into(), 1, t0);
    let sent = drain(&mut a);
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].node, sent[0].purpose), (0, Purpose::Attempt(1)));
    assert_eq!(a.poll_timeout(), Some(t0 + ms(500)), "the node's bound");
    a.handle_reply(0, Purpose::Attempt(1), granted(0), t0 + ms(1));
    assert!(a.is_done());
    let w = won(&mut a);
    assert_eq!((w.token.as_str(), w.attempts, w.started), ("tok", 1, t0));
    assert_eq!(w.answers.as_slice(), [NodeAnswer::Ok]);
    assert!(a.outcome().is_none(), "the outcome is given once");
    assert!(drain(&mut a).is_empty(), "nothing owed");
    assert_eq!(a.poll_timeout(), None);
}

#[test]
fn redlock_wins_at_quorum_and_a_late_fault_is_still_reported() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(3, 10_000, None, false), "tok".into(), 1, t0);
    assert_eq!(drain(&mut a).len(), 3);
    a.handle_reply(2, Purpose::Attempt(1), granted(0), t0 + ms(1));
    assert!(!a.is_done(), "one of three is no quorum");
    a.handle_reply(0, Purpose::Attempt(1), granted(0), t0 + ms(2));
    let w = won(&mut a);
    assert_eq!(
        w.answers.as_slice(),
        [NodeAnswer::Ok, NodeAnswer::Pending, NodeAnswer::Ok]
    );
    a.handle_reply(
        1,
        Purpose::Attempt(1),
        Err(NodeAnswer::Timeout),
        t0 + ms(500),
    );
    assert_eq!(
        events(&mut a),
        vec![
            Event::Fault {
                node: 1,
                answer: NodeAnswer::Timeout
            },
            Event::Late {
                node: 1,
                answer: NodeAnswer::Timeout
            }
        ]
    );
}

#[test]
fn fencing_waits_for_every_node_and_takes_the_highest_fence() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(3, 10_000, None, true), "tok".into(), 1, t0);
    drain(&mut a);
    a.handle_reply(0, Purpose::Attempt(1), granted(7), t0 + ms(1));
    a.handle_reply(1, Purpose::Attempt(1), granted(9), t0 + ms(2));
    assert!(
        !a.is_done(),
        "a quorum, but fencing needs every node's counter"
    );
    a.handle_reply(2, Purpose::Attempt(1), held(300), t0 + ms(3));
    let w = won(&mut a);
    assert_eq!(w.fence, 9);
}

#[test]
fn contended_then_woken_by_the_release_notice() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(1, 10_000, None, false), "tok".into(), 1, t0);
    drain(&mut a);
    a.handle_reply(0, Purpose::Attempt(1), held(5_000), t0 + ms(1));
    assert_eq!(events(&mut a), vec![Event::Contended, Event::Listen]);
    assert!(
        drain(&mut a).is_empty(),
        "held by another: nothing of ours to undo"
    );
    // Not yet listening: the pause is retryDelay + jitter, bounded by the lease.
    let first = a.poll_timeout().expect("a pause");
    assert!(
        first >= t0 + ms(101) && first <= t0 + ms(201),
        "{:?}",
        first - t0
    );
    a.listening();
    a.handle_timeout(first);
    let sent = drain(&mut a);
    assert_eq!(sent[0].purpose, Purpose::Attempt(2));
    a.handle_reply(0, Purpose::Attempt(2), held(4_800), first + ms(1));
    // Listening now: the pause runs to the end of the holder's lease (a bound
    // for a holder that vanished), and the notice ends it.
    let bound = a.poll_timeout().expect("a pause");
    assert!(bound >= first + ms(4_801), "{:?}", bound - first);
    a.handle_notice(first + ms(30));
    assert_eq!(events(&mut a), vec![Event::Contended, Event::Woken]);
    let sent = drain(&mut a);
    assert_eq!((sent.len(), sent[0].purpose), (1, Purpose::Attempt(3)));
    a.handle_reply(0, Purpose::Attempt(3), granted(0), first + ms(31));
    let w = won(&mut a);
    assert_eq!((w.attempts, w.token.as_str()), (3, "tok"));
}

#[test]
fn contended_until_the_wait_is_over() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(1, 250, None, false), "tok".into(), 7, t0);
    let (attempts, end) = run_to_end(&mut a, t0, || held(60_000));
    assert_eq!(end, t0 + ms(250), "ends when the wait does");
    let e = failed(&mut a);
    assert_eq!(e.code, ErrorCode::Timeout);
    assert!(
        e.message.starts_with("waitTimeout of 250 ms passed"),
        "{}",
        e.message
    );
    assert!(
        (2..=3).contains(&attempts),
        "{attempts} attempts in 250 ms at 100-200 ms apart"
    );
}

#[test]
fn retry_count_bounds_the_attempts() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(1, 10_000, Some(2), false), "tok".into(), 7, t0);
    let (attempts, _) = run_to_end(&mut a, t0, || held(60_000));
    let e = failed(&mut a);
    assert_eq!((e.code, attempts, e.attempts), (ErrorCode::Taken, 3, 3));
    assert_eq!(e.remaining_ms, Some(60_000));
}

#[test]
fn an_in_doubt_reply_is_undone_before_the_retry_which_keeps_the_token() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(1, 10_000, None, false), "tok".into(), 1, t0);
    drain(&mut a);
    assert_eq!(a.poll_timeout(), Some(t0 + ms(500)));
    a.handle_timeout(t0 + ms(500));
    assert_eq!(
        events(&mut a),
        vec![
            Event::Fault {
                node: 0,
                answer: NodeAnswer::Timeout
            },
            // An outage, not a holder: callers behind it need not wait for it.
            Event::Answered
        ]
    );
    // The attempt may have landed: its undo goes out, and the next attempt waits for it.
    let undo = drain(&mut a);
    assert_eq!(undo.len(), 1);
    assert_eq!(undo[0].purpose, Purpose::Undo(1));
    assert!(is_release(&undo[0]));
    assert_eq!(
        a.poll_timeout(),
        Some(t0 + ms(1_000)),
        "the undo's own bound"
    );
    // The attempt's reply comes late: only reported, never counted.
    a.handle_reply(0, Purpose::Attempt(1), granted(0), t0 + ms(600));
    assert!(drain(&mut a).is_empty());
    a.handle_reply(0, Purpose::Undo(1), released(), t0 + ms(601));
    let pause = a.poll_timeout().expect("a pause");
    assert!(
        pause >= t0 + ms(701) && pause <= t0 + ms(801),
        "{:?}",
        pause - t0
    );
    a.handle_timeout(pause);
    let retry = drain(&mut a);
    assert_eq!(retry[0].purpose, Purpose::Attempt(2));
    a.handle_reply(0, Purpose::Attempt(2), granted(0), pause + ms(1));
    assert_eq!(won(&mut a).token, "tok", "one node keeps its token");
}

#[test]
fn an_outage_is_waited_out_and_the_lock_taken_after_it() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(1, 10_000, None, false), "tok".into(), 3, t0);
    let down = || Err(NodeAnswer::Unreachable("Connection refused".into()));
    let mut now = t0;
    for n in 1..=3 {
        for t in drain(&mut a) {
            match t.purpose {
                Purpose::Attempt(m) => {
                    assert_eq!(m, n);
                    a.handle_reply(0, t.purpose, down(), now);
                }
                Purpose::Undo(_) | Purpose::Leave(_) => {
                    panic!("an unreachable node got no command: nothing to undo")
                }
            }
        }
        assert!(!a.is_done(), "an outage is retried within the wait");
        now = a.poll_timeout().expect("a pause");
        a.handle_timeout(now);
    }
    for t in drain(&mut a) {
        if let Purpose::Attempt(4) = t.purpose {
            a.handle_reply(0, t.purpose, granted(0), now + ms(1));
        }
    }
    assert_eq!(won(&mut a).attempts, 4);
    let faults = events(&mut a)
        .into_iter()
        .filter(|e| matches!(e, Event::Fault { .. }))
        .count();
    assert!(faults >= 3, "every failed attempt is reported ({faults})");
}

#[test]
fn an_outage_past_the_wait_keeps_its_own_code() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(1, 300, None, false), "tok".into(), 3, t0);
    let (_, now) = run_to_end(&mut a, t0, || {
        Err(NodeAnswer::Unreachable("refused".into()))
    });
    let e = failed(&mut a);
    assert_eq!(e.code, ErrorCode::Connection, "{e}");
    assert!(
        e.message.starts_with("waitTimeout of 300 ms passed"),
        "{}",
        e.message
    );
    assert!(now <= t0 + ms(300));
}

#[test]
fn cancel_mid_attempt_owes_the_undo_on_every_node_it_went_to() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(3, 10_000, None, false), "tok".into(), 1, t0);
    let first = a.poll_transmit().expect("node 0's command");
    assert_eq!(first.node, 0);
    let second = a.poll_transmit().expect("node 1's command");
    a.handle_reply(second.node, second.purpose, granted(0), t0 + ms(1));
    // Node 2's command was never taken: it is not sent now, nor undone.
    a.cancel(Cancel::Aborted);
    let e = failed(&mut a);
    assert_eq!((e.code, e.attempts), (ErrorCode::Aborted, 1));
    let owed = drain(&mut a);
    assert_eq!(
        owed.iter().map(|t| (t.node, t.purpose)).collect::<Vec<_>>(),
        vec![(0, Purpose::Undo(1)), (1, Purpose::Undo(1))]
    );
    assert!(owed.iter().all(is_release));
    assert_eq!(
        a.poll_timeout(),
        None,
        "the driver sends the undo and forgets it"
    );
    a.cancel(Cancel::Closed);
    assert!(a.outcome().is_none(), "cancelled once");
}

#[test]
fn a_closed_client_ends_a_pause_with_its_own_error() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(1, 10_000, None, false), "tok".into(), 1, t0);
    drain(&mut a);
    a.handle_reply(0, Purpose::Attempt(1), held(1_000), t0 + ms(1));
    a.cancel(Cancel::Closed);
    assert_eq!(failed(&mut a).code, ErrorCode::Closed);
    assert!(drain(&mut a).is_empty(), "nothing of ours was written");
}

#[test]
fn redlock_split_vote_is_undone_where_it_may_have_written_then_retried_with_a_fresh_token() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(3, 10_000, None, false), "tok".into(), 1, t0);
    drain(&mut a);
    a.handle_reply(0, Purpose::Attempt(1), granted(0), t0 + ms(1));
    a.handle_reply(1, Purpose::Attempt(1), held(800), t0 + ms(2));
    a.handle_reply(2, Purpose::Attempt(1), Err(NodeAnswer::Timeout), t0 + ms(3));
    assert!(!a.is_done(), "contended on a minority: retried");
    let undo = drain(&mut a);
    assert_eq!(
        undo.iter().map(|t| (t.node, t.purpose)).collect::<Vec<_>>(),
        vec![(0, Purpose::Undo(1)), (2, Purpose::Undo(1))],
        "the granting node and the one in doubt; never the holder's"
    );
    a.handle_reply(0, Purpose::Undo(1), released(), t0 + ms(4));
    assert_eq!(
        a.poll_timeout(),
        Some(t0 + ms(503)),
        "waits for every undo, within its bound"
    );
    a.handle_timeout(t0 + ms(503));
    let pause = a.poll_timeout().expect("a pause");
    a.handle_timeout(pause);
    let retry = drain(&mut a);
    assert_eq!(retry.len(), 3);
    assert_ne!(
        a.token(),
        "tok",
        "a fresh value per attempt on several nodes"
    );
    for t in retry {
        a.handle_reply(t.node, t.purpose, granted(0), pause + ms(1));
    }
    let w = won(&mut a);
    assert_eq!(w.attempts, 2);
    assert_ne!(w.token, "tok");
}

#[test]
fn after_a_split_vote_a_notice_wakes_it_at_a_random_instant_within_the_jitter() {
    // Waiters one release wakes would try at once and split the vote again.
    let t0 = Instant::now();
    let mut split = 0;
    for seed in 0..20 {
        let mut a = Acquisition::new(plan(3, 10_000, None, false), "tok".into(), seed, t0);
        drain(&mut a);
        a.handle_reply(0, Purpose::Attempt(1), granted(0), t0 + ms(1));
        a.handle_reply(1, Purpose::Attempt(1), held(8_000), t0 + ms(1));
        a.handle_reply(2, Purpose::Attempt(1), held(8_000), t0 + ms(1));
        a.handle_reply(0, Purpose::Undo(1), released(), t0 + ms(2));
        a.listening();
        assert!(a.is_paused());
        drain(&mut a);
        events(&mut a);
        a.handle_notice(t0 + ms(10));
        assert_eq!(events(&mut a), vec![Event::Woken]);
        let sent = drain(&mut a);
        if sent.is_empty() {
            split += 1;
            assert!(!a.is_paused(), "a second notice changes nothing");
            assert!(
                !a.waits_in_line(),
                "its timer makes its attempt, not the first's"
            );
            a.handle_notice(t0 + ms(11));
            assert!(events(&mut a).is_empty() && drain(&mut a).is_empty());
            let at = a.poll_timeout().expect("its attempt's instant");
            assert!(at > t0 + ms(10) && at <= t0 + ms(110), "{:?}", at - t0);
            a.handle_timeout(at);
            let sent = drain(&mut a);
            assert_eq!(sent.len(), 3);
            assert!(sent.iter().all(|t| t.purpose == Purpose::Attempt(2)));
        } else {
            assert_eq!(sent.len(), 3, "a jitter of 0 ms: at once");
        }
    }
    assert!(split >= 15, "spread over the jitter: {split} of 20");
    // Only a split vote spreads the wake: held on every node, it tries at once.
    let mut a = Acquisition::new(plan(3, 10_000, None, false), "tok".into(), 1, t0);
    drain(&mut a);
    for node in 0..3 {
        a.handle_reply(node, Purpose::Attempt(1), held(8_000), t0 + ms(1));
    }
    a.listening();
    a.handle_notice(t0 + ms(10));
    assert_eq!(drain(&mut a).len(), 3);
}

#[test]
fn the_wait_ending_mid_attempt_fails_it_and_owes_its_undo() {
    let t0 = Instant::now();
    let mut p = plan(1, 300, None, false);
    p.node_timeout = ms(1_000);
    let mut a = Acquisition::new(p, "tok".into(), 1, t0);
    drain(&mut a);
    assert_eq!(
        a.poll_timeout(),
        Some(t0 + ms(300)),
        "the wait comes before the node's bound"
    );
    a.handle_timeout(t0 + ms(300));
    let e = failed(&mut a);
    assert_eq!(e.code, ErrorCode::Timeout);
    assert!(
        e.message.contains("before the nodes answered"),
        "{}",
        e.message
    );
    assert_eq!(drain(&mut a).len(), 1, "the attempt may land: undone");
}

#[test]
fn a_lock_taken_too_late_is_given_back() {
    let t0 = Instant::now();
    let mut p = plan(1, 10_000, None, false);
    p.lease.ttl = ms(200);
    p.lease.drift = ms(4);
    p.node_timeout = ms(1_000);
    let mut a = Acquisition::new(p, "tok".into(), 1, t0);
    drain(&mut a);
    a.handle_reply(0, Purpose::Attempt(1), granted(0), t0 + ms(250));
    let e = failed(&mut a);
    assert_eq!(e.code, ErrorCode::Timeout);
    assert!(e.message.contains("taken too late"), "{}", e.message);
    let owed = drain(&mut a);
    assert!(
        owed.len() == 1 && is_release(&owed[0]),
        "our key is deleted"
    );
}

#[test]
fn wait_timeout_zero_is_one_attempt() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(1, 0, None, false), "tok".into(), 1, t0);
    drain(&mut a);
    assert_eq!(
        a.poll_timeout(),
        Some(t0 + ms(500)),
        "bounded by the node alone"
    );
    a.handle_reply(0, Purpose::Attempt(1), held(100), t0 + ms(1));
    let e = failed(&mut a);
    assert_eq!(e.code, ErrorCode::Timeout);
}

#[test]
fn the_same_seed_gives_the_same_pauses() {
    let pauses = |seed| {
        let t0 = Instant::now();
        let mut a = Acquisition::new(plan(1, 10_000, None, false), "tok".into(), seed, t0);
        let mut out = Vec::new();
        let mut now = t0;
        for _ in 0..5 {
            for t in drain(&mut a) {
                a.handle_reply(0, t.purpose, held(60_000), now);
            }
            let at = a.poll_timeout().expect("a pause");
            out.push(at - now);
            now = at;
            a.handle_timeout(now);
        }
        out
    };
    assert_eq!(pauses(42), pauses(42));
    assert!(pauses(42).iter().all(|p| *p >= ms(100) && *p <= ms(200)));
}

#[test]
fn behind_earlier_callers_it_sends_nothing_until_a_notice_or_its_pause_ends() {
    let t0 = Instant::now();
    let mut a = Acquisition::behind(plan(1, 10_000, None, false), "tok".into(), 1, t0);
    assert!(
        drain(&mut a).is_empty(),
        "no attempt ahead of earlier callers"
    );
    assert_eq!(
        events(&mut a),
        vec![Event::Listen],
        "it joins the key's line"
    );
    let pause = a.poll_timeout().expect("a pause");
    assert!(
        pause >= t0 + ms(100) && pause <= t0 + ms(200),
        "{:?}",
        pause - t0
    );
    a.handle_timeout(t0 + ms(50));
    assert!(drain(&mut a).is_empty(), "woken early by nothing due");
    a.handle_notice(t0 + ms(60));
    assert_eq!(events(&mut a), vec![Event::Woken]);
    let first = drain(&mut a);
    assert_eq!((first.len(), first[0].purpose), (1, Purpose::Attempt(1)));
    a.handle_reply(0, Purpose::Attempt(1), granted(0), t0 + ms(61));
    let w = won(&mut a);
    assert_eq!((w.attempts, w.started), (1, t0 + ms(60)));
}

#[test]
fn behind_earlier_callers_once_notices_are_heard_it_waits_up_to_the_lease() {
    let t0 = Instant::now();
    let mut a = Acquisition::behind(plan(1, 60_000, None, false), "tok".into(), 1, t0);
    a.listening();
    let pause = a.poll_timeout().expect("a pause");
    assert!(
        pause >= t0 + ms(10_000) && pause <= t0 + ms(10_100),
        "the lease plus jitter: {:?}",
        pause - t0
    );
    // With retries counted, the pause stays retryDelay + jitter.
    let mut b = Acquisition::behind(plan(1, 60_000, Some(3), false), "tok".into(), 1, t0);
    b.listening();
    assert!(b.poll_timeout().expect("a pause") <= t0 + ms(200));
}

#[test]
fn behind_earlier_callers_past_its_wait_it_fails_without_an_attempt() {
    let t0 = Instant::now();
    let mut a =
        Acquisition::behind(plan(1, 150, None, false), "tok".into(), 1, t0).waited_since(t0);
    let mut now = t0;
    while !a.is_done() {
        now = a.poll_timeout().expect("a bound");
        // Earlier callers stay ahead: each timer wakes the first instead.
        a.handle_behind(now);
        assert!(drain(&mut a).is_empty());
    }
    assert_eq!(now, t0 + ms(150), "the wait bounds it");
    let e = failed(&mut a);
    assert_eq!(e.code, ErrorCode::Timeout);
    assert_eq!(e.attempts, 0);
    assert!(e.message.contains("earlier callers"), "{}", e.message);
}

#[test]
fn before_its_turn_it_sends_nothing_and_its_wait_still_bounds_it() {
    let t0 = Instant::now();
    let mut a = Acquisition::in_turn(plan(1, 300, None, false), "tok".into(), 1, t0);
    assert!(a.waits_for_turn());
    assert!(drain(&mut a).is_empty(), "earlier callers go first");
    assert_eq!(
        a.poll_timeout(),
        Some(t0 + ms(300)),
        "only the wait bounds it"
    );
    a.handle_timeout(t0 + ms(299));
    assert!(!a.is_done());
    a.handle_notice(t0 + ms(100));
    assert!(drain(&mut a).is_empty(), "a release notice is not its turn");
    a.handle_timeout(t0 + ms(300));
    let e = failed(&mut a);
    assert_eq!((e.code, e.attempts), (ErrorCode::Timeout, 0));
    assert!(e.message.contains("earlier callers"), "{}", e.message);
    assert!(drain(&mut a).is_empty(), "nothing to undo");

    let mut b = Acquisition::in_turn(plan(1, 300, None, false), "tok".into(), 1, t0);
    b.cancel(Cancel::Aborted);
    let e = failed(&mut b);
    assert_eq!((e.code, e.attempts), (ErrorCode::Aborted, 0));
}

#[test]
fn its_turn_come_it_attempts_at_once_or_joins_the_line_behind_those_waiting() {
    let t0 = Instant::now();
    let mut a = Acquisition::in_turn(plan(2, 10_000, None, false), "tok".into(), 1, t0);
    a.handle_turn(false, t0 + ms(5));
    assert!(!a.waits_for_turn());
    let first = drain(&mut a);
    assert_eq!(first.len(), 2);
    assert!(first.iter().all(|t| t.purpose == Purpose::Attempt(1)));
    a.handle_turn(true, t0 + ms(6));
    assert!(drain(&mut a).is_empty(), "a second turn changes nothing");

    let mut b = Acquisition::in_turn(plan(1, 10_000, None, false), "tok".into(), 1, t0);
    b.handle_turn(true, t0 + ms(5));
    assert!(drain(&mut b).is_empty(), "behind those already in line");
    assert_eq!(events(&mut b), vec![Event::Listen]);
    assert!(b.is_paused());
    b.handle_notice(t0 + ms(20));
    assert_eq!(drain(&mut b)[0].purpose, Purpose::Attempt(1));
}

#[test]
fn a_pause_behind_the_first_in_line_is_as_long_again() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(1, 60_000, None, false), "tok".into(), 1, t0);
    drain(&mut a);
    a.handle_reply(0, Purpose::Attempt(1), held(5_000), t0 + ms(1));
    assert!(a.waits_in_line());
    let until = a.poll_timeout().expect("a pause");
    let span = until - (t0 + ms(1));
    a.handle_behind(until);
    assert_eq!(a.poll_timeout(), Some(until + span));
    assert!(drain(&mut a).is_empty(), "no attempt of its own");
}

#[test]
fn the_wait_counts_from_when_the_caller_began() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(1, 1_000, None, false), "tok".into(), 1, t0 + ms(300))
        .waited_since(t0);
    drain(&mut a);
    a.handle_reply(0, Purpose::Attempt(1), held(5_000), t0 + ms(301));
    let (_, end) = run_to_end(&mut a, t0 + ms(301), || held(5_000));
    assert_eq!(end, t0 + ms(1_000));
    assert_eq!(failed(&mut a).code, ErrorCode::Timeout);
}

#[test]
fn a_won_attempts_late_answers_come_back_for_its_lock_s_record() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(3, 10_000, None, false), "tok".into(), 1, t0);
    drain(&mut a);
    a.handle_reply(0, Purpose::Attempt(1), granted(0), t0 + ms(1));
    a.handle_reply(1, Purpose::Attempt(1), granted(0), t0 + ms(2));
    let w = won(&mut a);
    assert!(!a.all_answered(), "node 2 is still out");
    assert_eq!(w.answers[2], NodeAnswer::Pending);
    a.handle_reply(2, Purpose::Attempt(1), held(40), t0 + ms(3));
    assert!(a.all_answered());
    assert_eq!(
        events(&mut a),
        [Event::Late {
            node: 2,
            answer: NodeAnswer::Held { pttl_ms: Some(40) }
        }]
    );
    assert!(events(&mut a).is_empty());
}

#[test]
fn a_contended_attempt_asks_to_listen_once_and_only_with_notices() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(1, 60_000, None, false), "tok".into(), 1, t0);
    drain(&mut a);
    a.handle_reply(0, Purpose::Attempt(1), held(50), t0 + ms(1));
    assert_eq!(events(&mut a), vec![Event::Contended, Event::Listen]);
    let at = a.poll_timeout().expect("a pause");
    a.handle_timeout(at);
    drain(&mut a);
    a.handle_reply(0, Purpose::Attempt(2), held(50), at + ms(1));
    assert_eq!(events(&mut a), vec![Event::Contended], "asked once");
    let mut quiet = plan(1, 60_000, None, false);
    quiet.notices = false;
    let mut b = Acquisition::new(quiet, "tok".into(), 1, t0);
    drain(&mut b);
    b.handle_reply(0, Purpose::Attempt(1), held(50), t0 + ms(1));
    assert_eq!(events(&mut b), vec![Event::Contended, Event::Answered]);
}

#[test]
fn a_node_it_timed_out_itself_is_one_fault_though_the_transport_times_it_out_too() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(plan(1, 10_000, None, false), "tok".into(), 1, t0);
    drain(&mut a);
    a.handle_timeout(t0 + ms(500));
    let faults = |e: Vec<Event>| {
        e.into_iter()
            .filter(|e| matches!(e, Event::Fault { .. }))
            .count()
    };
    assert_eq!(faults(events(&mut a)), 1, "the machine's own timeout");
    let undo = drain(&mut a);
    assert!(
        undo.iter().all(is_release) && undo.len() == 1,
        "in doubt: undone"
    );
    a.handle_reply(
        0,
        Purpose::Attempt(1),
        Err(NodeAnswer::Timeout),
        t0 + ms(501),
    );
    assert_eq!(
        faults(events(&mut a)),
        0,
        "the transport's timeout of the same command"
    );
    a.handle_timeout(t0 + ms(1001));
    assert_eq!(faults(events(&mut a)), 1, "the undo's own timeout");
    a.handle_reply(0, Purpose::Undo(1), Err(NodeAnswer::Timeout), t0 + ms(1002));
    assert_eq!(faults(events(&mut a)), 0, "and the transport's, once");
    a.handle_reply(0, Purpose::Undo(1), Err(NodeAnswer::Timeout), t0 + ms(1003));
    assert_eq!(
        faults(events(&mut a)),
        1,
        "a third answer is not the same one"
    );
}

#[test]
fn permits_are_taken_by_the_semaphore_script_and_undone_like_a_lock() {
    let t0 = Instant::now();
    let token = Take::Permits {
        permits: crate::core::model::rw_permits(true),
        writer: String::new(),
        mark_ms: 0,
    }
    .token();
    let mut a = Acquisition::new(writer_plan(3), token.clone(), 1, t0);
    let first = drain(&mut a);
    assert_eq!(first.len(), 3);
    let script = first[0].call.script.get_hash().to_string();
    assert_eq!(
        script,
        crate::core::ops::scripts::SEM_ACQUIRE
            .get_hash()
            .to_string()
    );
    assert_ne!(
        script,
        crate::core::ops::scripts::ACQUIRE.get_hash().to_string()
    );
    // A semaphore grants `[1, count]` (no fence) or answers `[0, wait]`.
    a.handle_reply(
        0,
        Purpose::Attempt(1),
        Ok(R::Array(vec![R::Int(1), R::Int(3)])),
        t0 + ms(1),
    );
    a.handle_reply(1, Purpose::Attempt(1), held(700), t0 + ms(2));
    a.handle_reply(2, Purpose::Attempt(1), held(900), t0 + ms(3));
    assert!(events(&mut a).contains(&Event::Contended));
    let undo = drain(&mut a);
    assert_eq!(
        undo.iter().map(|t| (t.node, t.purpose)).collect::<Vec<_>>(),
        [(0, Purpose::Undo(1))],
        "the node that granted it gives its permits back"
    );
    assert_eq!(
        undo[0].call.script.get_hash().to_string(),
        crate::core::ops::scripts::RELEASE.get_hash().to_string()
    );
    a.handle_reply(0, Purpose::Undo(1), released(), t0 + ms(4));
    let at = a.poll_timeout().expect("a pause");
    a.handle_timeout(at);
    let second = drain(&mut a);
    assert_eq!(second.len(), 3);
    let retry_token = a.token().to_string();
    assert_ne!(
        retry_token.as_str(),
        token.as_str(),
        "a fresh token per attempt on several nodes"
    );
    assert!(
        retry_token.starts_with(&token[..token.find(':').expect("a permits prefix") + 1]),
        "which still names its permits: {retry_token}"
    );
    for node in 0..3 {
        a.handle_reply(
            node,
            Purpose::Attempt(2),
            Ok(R::Array(vec![R::Int(1), R::Int(1)])),
            at + ms(1),
        );
    }
    let w = won(&mut a);
    assert_eq!((w.attempts, w.fence, w.token), (2, 0, retry_token.into()));
}

fn plain(reply: R, pttl: i64) -> Answer {
    Ok(R::Array(vec![reply, R::Int(pttl)]))
}

#[test]
fn a_plain_first_attempt_is_set_nx_px_and_its_answers_read_as_the_scripts() {
    let t0 = Instant::now();
    let mut p = plan(1, 10_000, None, false);
    p.plain_first = true;
    let mut a = Acquisition::new(p.clone(), "tok".into(), 1, t0);
    let sent = drain(&mut a);
    assert!(sent[0].call.is_plain());
    // Taken at once: the SET's OK alone (no PTTL is read).
    a.handle_reply(
        0,
        Purpose::Attempt(1),
        Ok(R::Status("OK".into())),
        t0 + ms(1),
    );
    assert_eq!(won(&mut a).answers.as_slice(), [NodeAnswer::Ok]);

    // Taken: the holder's lease left (the PTTL sent after the SET's nil)
    // bounds the pause, as the script's answer does.
    let mut a = Acquisition::new(p, "tok".into(), 1, t0);
    drain(&mut a);
    a.handle_reply(0, Purpose::Attempt(1), plain(R::Nil, 40), t0 + ms(1));
    assert!(!a.is_done());
    let resumed = a.poll_timeout().expect("a pause");
    assert!(
        resumed <= t0 + ms(1 + 41),
        "tries again once the holder's lease ends"
    );
}

#[test]
fn an_in_doubt_plain_first_attempt_is_retried_by_the_script_with_the_same_token() {
    let t0 = Instant::now();
    let mut p = plan(1, 10_000, None, false);
    p.plain_first = true;
    let mut a = Acquisition::new(p, "tok".into(), 1, t0);
    assert!(drain(&mut a)[0].call.is_plain());
    // No reply: the SET may have landed. The retry must recognise the token.
    a.handle_reply(
        0,
        Purpose::Attempt(1),
        Err(NodeAnswer::Timeout),
        t0 + ms(500),
    );
    let mut now = t0 + ms(500);
    let retry = loop {
        if let Some(t) = drain(&mut a)
            .into_iter()
            .find(|t| matches!(t.purpose, Purpose::Attempt(_)))
        {
            break t;
        }
        now = a.poll_timeout().expect("a next step");
        a.handle_timeout(now);
    };
    assert_eq!(retry.purpose, Purpose::Attempt(2));
    assert!(!retry.call.is_plain(), "the retry takes the script");
    assert!(std::ptr::eq(
        retry.call.script,
        &*crate::core::ops::scripts::ACQUIRE
    ));
    assert_eq!(a.token(), "tok");
    a.handle_reply(0, Purpose::Attempt(2), granted(0), now + ms(1));
    assert_eq!(won(&mut a).token, "tok");
}
