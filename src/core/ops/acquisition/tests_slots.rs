//! A Redlock semaphore's acquisition (numbered slots on several nodes) fed
//! literal replies at literal instants.

use std::time::Instant;

use super::tests::{drain, events, failed, ms, plan, won};
use super::*;
use crate::core::error::ErrorCode;
use crate::core::ops::scripts;
use crate::core::ops::Reply as R;

fn slots_plan(nodes: usize, retry_count: Option<u32>) -> Plan {
    let mut permits = crate::core::model::check_permits(3, 2).expect("permits");
    permits.kind = crate::core::model::Kind::Slots;
    Plan {
        take: Take::Slots { permits },
        ..plan(nodes, 10_000, retry_count, false)
    }
}

fn granted(member: &str) -> Answer {
    Ok(R::Array(vec![
        R::Int(1),
        R::Int(0),
        R::Bulk(member.as_bytes().to_vec()),
    ]))
}

fn busy(wait: i64) -> Answer {
    Ok(R::Array(vec![R::Int(0), R::Int(wait)]))
}

fn runs(t: &Transmit, script: &redis::Script) -> bool {
    t.call.script.get_hash() == script.get_hash()
}

#[test]
fn the_member_a_quorum_granted_is_the_holders_token_and_other_slots_are_freed() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(slots_plan(3, None), "2:*:u".into(), 7, t0);
    let sent = drain(&mut a);
    assert_eq!(sent.len(), 3);
    assert!(runs(&sent[0], &scripts::SEM_SLOTS));
    let args = sent[0].call.args_text();
    assert_eq!(args[..4], ["2:*:u", "10000", "3", "2"]);
    let first: u32 = args[4].parse().expect("the first slot");
    assert!(first < 3, "within the limit: {first}");
    assert!(
        sent.iter().all(|t| t.call.args_text() == args),
        "the same order on every node"
    );
    a.handle_reply(0, Purpose::Attempt(1), granted("2:0-1:u"), t0 + ms(1));
    a.handle_reply(1, Purpose::Attempt(1), granted("2:1.2:u"), t0 + ms(2));
    assert!(
        !a.is_done(),
        "which slots won is read off every node's reply"
    );
    a.handle_reply(2, Purpose::Attempt(1), granted("2:0-1:u"), t0 + ms(3));
    let owed = drain(&mut a);
    let w = won(&mut a);
    assert_eq!((w.token.as_str(), w.attempts), ("2:0-1:u", 1));
    assert_eq!(w.answers[1], NodeAnswer::Held { pttl_ms: None });
    assert_eq!(owed.len(), 1, "{owed:?}");
    assert_eq!((owed[0].node, owed[0].purpose), (1, Purpose::Undo(1)));
    assert!(runs(&owed[0], &scripts::SEM_UNDO));
    assert_eq!(
        owed[0].call.args_text(),
        ["2:*:u", "2:0-1:u", "__lockdog:released:"],
        "everything the attempt wrote there but the holder's member"
    );
}

#[test]
fn slots_no_quorum_agrees_on_are_undone_where_written_then_retried_with_a_fresh_token() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(slots_plan(3, None), "2:*:u".into(), 7, t0);
    drain(&mut a);
    a.handle_reply(0, Purpose::Attempt(1), granted("2:0-1:u"), t0 + ms(1));
    a.handle_reply(1, Purpose::Attempt(1), granted("2:1.2:u"), t0 + ms(2));
    a.handle_reply(2, Purpose::Attempt(1), busy(400), t0 + ms(3));
    assert!(!a.is_done());
    assert!(events(&mut a).contains(&Event::Contended));
    let undo = drain(&mut a);
    assert_eq!(
        undo.iter().map(|t| (t.node, t.purpose)).collect::<Vec<_>>(),
        [(0, Purpose::Undo(1)), (1, Purpose::Undo(1))],
        "both nodes that wrote slots; not the busy one"
    );
    assert_eq!(
        undo[0].call.args_text(),
        ["2:*:u", "", "__lockdog:released:"]
    );
    a.handle_reply(0, Purpose::Undo(1), Ok(R::Int(1)), t0 + ms(4));
    a.handle_reply(1, Purpose::Undo(1), Ok(R::Int(1)), t0 + ms(4));
    assert!(events(&mut a).is_empty(), "an undo's count is no fault");
    let at = a.poll_timeout().expect("a pause");
    a.handle_timeout(at);
    let retry = drain(&mut a);
    assert_eq!(retry.len(), 3);
    let token = a.token().to_string();
    assert!(token.starts_with("2:*:") && token != "2:*:u", "{token}");
}

#[test]
fn a_node_that_never_answered_may_hold_slots_and_is_undone() {
    let t0 = Instant::now();
    let mut a = Acquisition::new(slots_plan(3, Some(0)), "2:*:u".into(), 7, t0);
    drain(&mut a);
    a.handle_reply(0, Purpose::Attempt(1), busy(100), t0 + ms(1));
    a.handle_reply(
        1,
        Purpose::Attempt(1),
        Err(NodeAnswer::Unreachable("refused".into())),
        t0 + ms(1),
    );
    a.handle_timeout(t0 + ms(500));
    assert_eq!(failed(&mut a).code, ErrorCode::Taken);
    let owed = drain(&mut a);
    assert_eq!(
        owed.iter().map(|t| (t.node, t.purpose)).collect::<Vec<_>>(),
        [(2, Purpose::Undo(1))],
        "the node that timed out, not the one never reached"
    );
}
