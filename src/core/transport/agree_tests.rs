//! Every operation fed the same literal replies through both drivers' reading
//! of them (tokio: redis-rs's parse into a `redis::Value`, then
//! `runtime::reply`; the fast path: `uvloop::owed::decode`), with the same outcome.

use std::time::{Duration, Instant};

use bytes::BytesMut;
use redis::RedisError;

use crate::core::error::NodeAnswer;
use crate::core::model::LockKind;
use crate::core::ops::acquisition::plan;
use crate::core::ops::permits::{self, SlotReply};
use crate::core::ops::scripts;
use crate::core::ops::{extend, release, renew, Answer, Gather, Progress, Reply};
use crate::core::ops::{Answers, LateAnswers};
use crate::core::quorum::{Acquired, Released, Renewed};
use crate::core::transport::tokio::reply::answer_of;
use crate::core::transport::uvloop::owed::decode;

/// The tokio driver's reply for these bytes.
fn tokio(bytes: &[u8]) -> Answer {
    answer_of(redis::parse_redis_value(bytes))
}

/// The fast driver's reply for these bytes.
fn fast(bytes: &[u8]) -> Answer {
    let mut buf = BytesMut::from(bytes);
    let reply = decode(&mut buf).expect("a valid reply");
    Ok(reply.expect("a whole reply"))
}

/// Both drivers' reply, checked to be the same.
fn both(bytes: &[u8]) -> Answer {
    let (t, f) = (tokio(bytes), fast(bytes));
    assert_eq!(t, f, "{:?}", String::from_utf8_lossy(bytes));
    t
}

/// What each driver's reply comes to through `decode`, checked to agree.
fn same<T: PartialEq + std::fmt::Debug>(bytes: &[u8], decode: impl Fn(Answer) -> T) -> T {
    let (t, f) = (decode(tokio(bytes)), decode(fast(bytes)));
    assert_eq!(t, f, "{:?}", String::from_utf8_lossy(bytes));
    t
}

fn error_text(answer: &NodeAnswer) -> &str {
    match answer {
        NodeAnswer::ErrorReply(f) => f.text(),
        other => panic!("not an error reply: {other:?}"),
    }
}

const MS: Duration = Duration::from_millis(1);

// The replies themselves.

#[test]
fn integers_read_the_same() {
    assert_eq!(both(b":1\r\n"), Ok(Reply::Int(1)));
    assert_eq!(both(b":-2\r\n"), Ok(Reply::Int(-2)));
}

#[test]
fn status_replies_read_the_same() {
    assert_eq!(both(b"+OK\r\n"), Ok(Reply::Status("OK".into())));
    assert_eq!(both(b"+PONG\r\n"), Ok(Reply::Status("PONG".into())));
}

#[test]
fn nil_reads_the_same() {
    assert_eq!(both(b"$-1\r\n"), Ok(Reply::Nil));
    assert_eq!(both(b"*-1\r\n"), Ok(Reply::Nil));
}

#[test]
fn bulk_strings_read_the_same() {
    assert_eq!(both(b"$5\r\nhello\r\n"), Ok(Reply::Bulk(b"hello".to_vec())));
    assert_eq!(both(b"$0\r\n\r\n"), Ok(Reply::Bulk(Vec::new())));
}

#[test]
fn nested_arrays_read_the_same() {
    let reply = both(b"*3\r\n:1\r\n*2\r\n:2\r\n$1\r\nx\r\n$-1\r\n");
    assert_eq!(
        reply,
        Ok(Reply::Array(vec![
            Reply::Int(1),
            Reply::Array(vec![Reply::Int(2), Reply::Bulk(b"x".to_vec())]),
            Reply::Nil,
        ]))
    );
    assert_eq!(both(b"*0\r\n"), Ok(Reply::Array(Vec::new())));
}

#[test]
fn error_replies_read_the_same() {
    let reply = both(b"-WRONGTYPE Operation against a key\r\n");
    assert!(
        matches!(reply, Ok(Reply::Error(f)) if f.text() == "WRONGTYPE Operation against a key")
    );
    assert!(matches!(both(b"-ERR x y z\r\n"), Ok(Reply::Error(f)) if f.text() == "ERR x y z"));
}

#[test]
fn noscript_is_a_kind_of_its_own_on_both() {
    assert_eq!(
        both(b"-NOSCRIPT No matching script. Please use EVAL.\r\n"),
        Ok(Reply::NoScript)
    );
}

#[test]
fn a_cut_connection_is_the_nodes_fault_not_a_reply() {
    let cut = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
    assert!(matches!(
        answer_of(Err(cut)),
        Err(NodeAnswer::Unreachable(_))
    ));
}

#[test]
fn a_server_error_from_redis_rs_keeps_its_cause() {
    let Ok(redis::Value::ServerError(e)) = redis::parse_redis_value(b"-LOADING wait\r\n") else {
        panic!("a server error")
    };
    let answer = plan::answer(answer_of(Err(e.into()))).0;
    assert_eq!(error_text(&answer), "LOADING wait");
    assert!(answer.cause().is_some(), "the redis error stays its cause");
    assert!(answer.is_transient());
}

#[test]
fn ints_of_an_array_only_when_all_are_integers() {
    assert_eq!(
        Reply::Array(vec![Reply::Int(1), Reply::Int(2)]).ints(),
        Some(vec![1, 2])
    );
    assert_eq!(Reply::Array(vec![Reply::Int(1), Reply::Nil]).ints(), None);
    assert_eq!(Reply::Int(1).ints(), None);
}

// Acquire.

#[test]
fn acquire_granted_carries_the_fence() {
    assert_eq!(
        same(b"*2\r\n:1\r\n:42\r\n", plan::answer),
        (NodeAnswer::Ok, 42)
    );
    assert_eq!(
        same(b"*2\r\n:1\r\n:0\r\n", plan::answer),
        (NodeAnswer::Ok, 0)
    );
}

#[test]
fn acquire_contended_carries_the_holders_pttl() {
    assert_eq!(
        same(b"*2\r\n:0\r\n:1500\r\n", plan::answer),
        (
            NodeAnswer::Held {
                pttl_ms: Some(1500)
            },
            0
        )
    );
}

#[test]
fn acquire_contended_by_a_key_without_ttl_has_no_pttl() {
    assert_eq!(
        same(b"*2\r\n:0\r\n:-1\r\n", plan::answer),
        (NodeAnswer::Held { pttl_ms: None }, 0)
    );
}

#[test]
fn acquire_error_reply_is_the_nodes_error() {
    let (answer, fence) = same(b"-OOM command not allowed\r\n", plan::answer);
    assert_eq!((error_text(&answer), fence), ("OOM command not allowed", 0));
}

#[test]
fn acquire_unexpected_replies_are_error_replies() {
    for bytes in [
        &b":1\r\n"[..],
        b"*1\r\n:1\r\n",
        b"$-1\r\n",
        b"*2\r\n:2\r\n:1\r\n",
    ] {
        let (answer, _) = same(bytes, plan::answer);
        assert!(
            error_text(&answer).starts_with("unexpected acquire reply"),
            "{answer:?}"
        );
    }
}

#[test]
fn acquire_noscript_that_reaches_the_operation_is_an_error() {
    let (answer, _) = same(b"-NOSCRIPT No matching script\r\n", plan::answer);
    assert!(error_text(&answer).starts_with("NOSCRIPT"));
}

#[test]
fn acquire_fault_passes_through() {
    assert_eq!(
        plan::answer(Err(NodeAnswer::Timeout)),
        (NodeAnswer::Timeout, 0)
    );
}

fn tally(answers: &[NodeAnswer]) -> crate::core::quorum::Tally {
    crate::core::quorum::Tally::of(answers)
}

#[test]
fn acquire_is_decided_at_quorum_without_fencing() {
    let t = tally(&[NodeAnswer::Ok, NodeAnswer::Ok, NodeAnswer::Pending]);
    assert!(plan::decided(&t, false, false, 100 * MS, 10 * MS));
}

#[test]
fn acquire_with_fencing_waits_for_every_node() {
    let t = tally(&[NodeAnswer::Ok, NodeAnswer::Ok, NodeAnswer::Pending]);
    assert!(!plan::decided(&t, false, true, 100 * MS, 10 * MS));
    assert!(plan::decided(&t, true, true, 100 * MS, 10 * MS));
}

#[test]
fn acquire_with_too_little_validity_waits_for_every_node() {
    let t = tally(&[NodeAnswer::Ok, NodeAnswer::Ok, NodeAnswer::Pending]);
    assert!(!plan::decided(&t, false, false, 5 * MS, 10 * MS));
}

#[test]
fn acquire_without_quorum_waits_for_every_node() {
    let t = tally(&[NodeAnswer::Ok, NodeAnswer::Timeout, NodeAnswer::Pending]);
    assert!(!plan::decided(&t, false, false, 100 * MS, Duration::ZERO));
    assert!(plan::decided(&t, true, false, 100 * MS, Duration::ZERO));
}

#[test]
fn acquire_verdicts() {
    let ok = NodeAnswer::Ok;
    let held = NodeAnswer::Held { pttl_ms: Some(9) };
    let v = |answers: &[NodeAnswer], validity| plan::verdict(answers, validity, 10 * MS);
    assert_eq!(
        v(&[ok.clone(), ok.clone(), held.clone()], 20 * MS),
        Acquired::Won
    );
    assert_eq!(
        v(&[ok.clone(), held.clone(), held.clone()], 20 * MS),
        Acquired::Contended {
            longest_pttl: Some(9)
        }
    );
    assert_eq!(
        v(&[ok.clone(), ok.clone(), ok.clone()], 5 * MS),
        Acquired::TooLate
    );
    assert_eq!(
        v(&[ok, NodeAnswer::Timeout, NodeAnswer::Timeout], 20 * MS),
        Acquired::NoQuorum
    );
}

fn lease(fencing: bool) -> plan::LeaseTerms {
    plan::LeaseTerms {
        ttl: 1000 * MS,
        drift: 12 * MS,
        min_validity: 100 * MS,
        fencing,
    }
}

#[test]
fn acquire_validity_is_ttl_less_elapsed_less_drift() {
    let t0 = Instant::now();
    assert_eq!(lease(false).validity(t0, t0 + 88 * MS), 900 * MS);
    assert_eq!(lease(false).validity(t0, t0 + 5000 * MS), Duration::ZERO);
    assert_eq!(
        lease(false).validity(t0 + MS, t0),
        988 * MS,
        "a clock behind counts as no time"
    );
}

/// Feeds one attempt the replies (as bytes) through the fast reading.
fn attempt(
    fencing: bool,
    replies: &[(usize, &[u8])],
    now: Duration,
) -> (Vec<Progress>, plan::Acquire) {
    let t0 = Instant::now();
    let mut op = plan::Acquire::new(3, lease(fencing));
    let progress = replies
        .iter()
        .map(|(i, bytes)| op.on_reply(*i, fast(bytes), t0, t0 + now))
        .collect();
    (progress, op)
}

#[test]
fn an_acquire_attempt_decides_at_quorum_and_records_the_late_node() {
    let won: &[u8] = b"*2\r\n:1\r\n:0\r\n";
    let (progress, op) = attempt(false, &[(0, won), (2, won), (1, b"-ERR boom\r\n")], 10 * MS);
    assert_eq!(progress[0], Progress::Waiting);
    assert_eq!(
        progress[1],
        Progress::Decided([NodeAnswer::Ok, NodeAnswer::Pending, NodeAnswer::Ok][..].into())
    );
    assert!(matches!(
        &progress[2],
        Progress::Late {
            node: 1,
            answer: NodeAnswer::ErrorReply(_),
            fault: Some(_),
            all_in: true
        }
    ));
    assert!(op.faulted());
}

#[test]
fn an_acquire_attempt_with_fencing_takes_the_highest_fence() {
    let (progress, op) = attempt(
        true,
        &[
            (0, b"*2\r\n:1\r\n:7\r\n"),
            (1, b"*2\r\n:1\r\n:9\r\n"),
            (2, b"*2\r\n:1\r\n:8\r\n"),
        ],
        10 * MS,
    );
    assert_eq!(progress[1], Progress::Waiting, "fencing waits for all");
    assert!(matches!(progress[2], Progress::Decided(_)));
    assert_eq!(op.fence(), 9);
}

#[test]
fn an_acquire_attempt_answered_too_late_waits_for_all_and_is_too_late() {
    let won: &[u8] = b"*2\r\n:1\r\n:0\r\n";
    let (progress, _) = attempt(false, &[(0, won), (1, won), (2, won)], 950 * MS);
    assert_eq!(progress[1], Progress::Waiting);
    let Progress::Decided(answers) = &progress[2] else {
        panic!("decided once all are in")
    };
    let validity = lease(false).validity(Instant::now(), Instant::now() + 950 * MS);
    assert_eq!(
        plan::verdict(answers, validity, 100 * MS),
        Acquired::TooLate
    );
}

#[test]
fn acquire_call_packs_keys_then_token_ttl_and_lock_count() {
    let call = plan::call_fenced(&["k".to_string()], &["k:fence".to_string()], "tok", 500);
    let packed = String::from_utf8_lossy(&call.evalsha()).into_owned();
    assert!(packed.starts_with("*8\r\n$7\r\nEVALSHA\r\n$40\r\n"));
    assert!(packed.contains(scripts::ACQUIRE.get_hash()));
    assert!(packed
        .ends_with("$1\r\n2\r\n$1\r\nk\r\n$7\r\nk:fence\r\n$3\r\ntok\r\n$3\r\n500\r\n$1\r\n1\r\n"));
}

// Release.

#[test]
fn release_of_every_key_is_ok() {
    assert_eq!(same(b":2\r\n", |r| release::answer(r, 2)), NodeAnswer::Ok);
}

#[test]
fn release_of_fewer_keys_is_not_held() {
    assert_eq!(
        same(b":1\r\n", |r| release::answer(r, 2)),
        NodeAnswer::NotHeld
    );
    assert_eq!(
        same(b":0\r\n", |r| release::answer(r, 1)),
        NodeAnswer::NotHeld
    );
}

#[test]
fn release_error_and_unexpected_replies() {
    let answer = same(b"-READONLY You can't write\r\n", |r| release::answer(r, 1));
    assert_eq!(error_text(&answer), "READONLY You can't write");
    assert!(answer.is_transient());
    let answer = same(b"$-1\r\n", |r| release::answer(r, 1));
    assert!(error_text(&answer).starts_with("unexpected release reply"));
}

#[test]
fn a_release_decides_at_quorum_and_returns_late_answers() {
    let mut op = release::Release::new(3, 1);
    assert_eq!(op.on_reply(0, fast(b":1\r\n")), Progress::Waiting);
    let decided = op.on_reply(2, fast(b":1\r\n"));
    assert_eq!(
        decided,
        Progress::Decided([NodeAnswer::Ok, NodeAnswer::Pending, NodeAnswer::Ok][..].into())
    );
    let late = op.on_reply(1, fast(b":0\r\n"));
    assert_eq!(
        late,
        Progress::Late {
            node: 1,
            answer: NodeAnswer::NotHeld,
            fault: None,
            all_in: true
        },
        "for the driver to record"
    );
}

#[test]
fn release_verdicts() {
    let (ok, no) = (NodeAnswer::Ok, NodeAnswer::NotHeld);
    assert_eq!(
        release::verdict(&[ok.clone(), ok.clone(), no.clone()]),
        Released::Released
    );
    assert_eq!(
        release::verdict(&[ok.clone(), no.clone(), no.clone()]),
        Released::NotOurs
    );
    assert_eq!(
        release::verdict(&[ok, NodeAnswer::Timeout, NodeAnswer::Timeout]),
        Released::NoQuorum
    );
}

#[test]
fn a_release_without_quorum_waits_for_every_node() {
    let mut op = release::Release::new(3, 1);
    assert_eq!(op.on_reply(0, Err(NodeAnswer::Timeout)), Progress::Waiting);
    assert_eq!(op.on_reply(1, fast(b":0\r\n")), Progress::Waiting);
    assert!(matches!(
        op.on_reply(2, fast(b":1\r\n")),
        Progress::Decided(_)
    ));
    assert!(op.faulted());
}

#[test]
fn release_call_names_the_notice_channel() {
    let call = release::call(&["a".to_string()], "t", "lockdog:released:");
    let packed = String::from_utf8_lossy(&call.evalsha()).into_owned();
    assert!(packed.contains(scripts::RELEASE.get_hash()));
    assert!(packed.ends_with("$1\r\n1\r\n$1\r\na\r\n$1\r\nt\r\n$17\r\nlockdog:released:\r\n"));
}

// Extend.

#[test]
fn extend_replies() {
    assert_eq!(same(b":1\r\n", extend::answer), NodeAnswer::Ok);
    assert_eq!(same(b":0\r\n", extend::answer), NodeAnswer::NotHeld);
    let answer = same(b"-ERR wrong\r\n", extend::answer);
    assert_eq!(error_text(&answer), "ERR wrong");
    // A script-free SET … IFEQ: OK, or nil.
    assert_eq!(same(b"+OK\r\n", extend::answer), NodeAnswer::Ok);
    assert_eq!(same(b"$-1\r\n", extend::answer), NodeAnswer::NotHeld);
    let answer = same(b"+QUEUED\r\n", extend::answer);
    assert!(error_text(&answer).starts_with("unexpected extend reply"));
}

#[test]
fn extend_verdict_in_time_is_renewed_with_the_new_deadline() {
    let t0 = Instant::now();
    let ok = [NodeAnswer::Ok, NodeAnswer::Ok, NodeAnswer::Pending];
    let (verdict, deadline) = extend::verdict(&ok, t0, 1000 * MS, 12 * MS, t0 + 50 * MS);
    assert_eq!((verdict, deadline), (Renewed::Renewed, t0 + 988 * MS));
}

#[test]
fn extend_verdict_past_the_deadline_is_too_late() {
    let t0 = Instant::now();
    let ok = [NodeAnswer::Ok];
    let (verdict, _) = extend::verdict(&ok, t0, 100 * MS, 12 * MS, t0 + 88 * MS);
    assert_eq!(verdict, Renewed::TooLate);
}

#[test]
fn extend_verdict_lost_and_no_quorum() {
    let t0 = Instant::now();
    let gone = [NodeAnswer::NotHeld, NodeAnswer::NotHeld, NodeAnswer::Ok];
    assert_eq!(
        extend::verdict(&gone, t0, 100 * MS, MS, t0).0,
        Renewed::Lost
    );
    let out = [NodeAnswer::Timeout, NodeAnswer::NotHeld, NodeAnswer::Ok];
    assert_eq!(
        extend::verdict(&out, t0, 100 * MS, MS, t0).0,
        Renewed::NoQuorum
    );
}

#[test]
fn an_extension_decides_at_quorum() {
    let mut op = extend::Extend::new(3);
    assert_eq!(op.on_reply(1, fast(b":1\r\n")), Progress::Waiting);
    assert!(matches!(
        op.on_reply(0, fast(b":1\r\n")),
        Progress::Decided(_)
    ));
    let late = op.on_reply(2, Err(NodeAnswer::Timeout));
    assert_eq!(
        late,
        Progress::Late {
            node: 2,
            answer: NodeAnswer::Timeout,
            fault: Some(NodeAnswer::Timeout),
            all_in: true
        }
    );
}

// Renew.

#[test]
fn renew_reads_one_answer_per_lock() {
    assert_eq!(
        same(b"*3\r\n:1\r\n:0\r\n:1\r\n", |r| renew::answers(r, 3)),
        [NodeAnswer::Ok, NodeAnswer::NotHeld, NodeAnswer::Ok]
    );
}

#[test]
fn renew_reply_of_the_wrong_length_fails_every_lock() {
    let answers = same(b"*1\r\n:1\r\n", |r| renew::answers(r, 2));
    assert_eq!(answers.len(), 2);
    assert!(answers
        .iter()
        .all(|a| error_text(a).starts_with("unexpected renewal reply")));
}

#[test]
fn renew_error_reply_fails_every_lock_alike() {
    let answers = same(b"-BUSY script running\r\n", |r| renew::answers(r, 2));
    assert_eq!(answers[0], answers[1]);
    assert_eq!(error_text(&answers[0]), "BUSY script running");
}

#[test]
fn renew_noscript_reads_as_the_nodes_noscript_for_the_recovery() {
    let answers = same(b"-NOSCRIPT No matching script\r\n", |r| {
        renew::answers(r, 1)
    });
    assert!(crate::core::transport::tokio::reply::is_noscript(
        &answers[0]
    ));
}

#[test]
fn renew_odd_items_are_failed_renewals() {
    let answers = same(b"*2\r\n:1\r\n$1\r\nx\r\n", |r| renew::answers(r, 2));
    assert_eq!(answers[0], NodeAnswer::Ok);
    assert!(error_text(&answers[1]).starts_with("the renewal failed"));
}

#[test]
fn renew_call_lists_keys_then_one_triple_per_lock() {
    let (a, b) = (["a".to_string()], ["b".to_string(), "c".to_string()]);
    let batch = [
        renew::Renewal {
            keys: &a,
            token: "t1",
            ttl_ms: 10,
        },
        renew::Renewal {
            keys: &b,
            token: "t2",
            ttl_ms: 20,
        },
    ];
    let packed = String::from_utf8_lossy(&renew::call(&batch).evalsha()).into_owned();
    assert!(packed.contains(scripts::RENEW.get_hash()));
    let tail = "$1\r\n3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\n2\r\n\
                $1\r\n1\r\n$2\r\nt1\r\n$2\r\n10\r\n$1\r\n2\r\n$2\r\nt2\r\n$2\r\n20\r\n";
    assert!(packed.ends_with(tail), "{packed}");
}

#[test]
fn a_batch_is_cut_into_whole_locks_of_bounded_keys() {
    use renew::{chunks, Renewal, MAX_RENEWAL_KEYS};
    let keys: Vec<String> = (0..MAX_RENEWAL_KEYS + 1).map(|i| format!("k{i}")).collect();
    let lock = |n: usize| Renewal {
        keys: &keys[..n],
        token: "t",
        ttl_ms: 1,
    };
    assert!(chunks(&[]).is_empty());
    let one = chunks(&[lock(1), lock(2)]);
    assert_eq!((one.len(), one[0].clone()), (1, 0..2));
    let many: Vec<Renewal<'_>> = (0..2 * MAX_RENEWAL_KEYS + 1).map(|_| lock(1)).collect();
    assert_eq!(
        chunks(&many),
        [
            0..MAX_RENEWAL_KEYS,
            MAX_RENEWAL_KEYS..2 * MAX_RENEWAL_KEYS,
            2 * MAX_RENEWAL_KEYS..2 * MAX_RENEWAL_KEYS + 1
        ]
    );
    // A lock never straddles two calls; one larger than the bound goes alone.
    let mixed = [lock(600), lock(600), lock(MAX_RENEWAL_KEYS + 1), lock(1)];
    assert_eq!(chunks(&mixed), [0..1, 1..2, 2..3, 3..4]);
    let fits = [lock(400), lock(600), lock(1)];
    assert_eq!(chunks(&fits), [0..2, 2..3]);
}

// Gather.

#[test]
fn gather_ignores_a_node_it_does_not_know() {
    let mut g: Gather<()> = Gather::new(1);
    assert_eq!(g.offer(5, NodeAnswer::Ok, (), |_| true), Progress::Waiting);
    assert!(!g.is_decided());
}

#[test]
fn gather_decides_once_then_only_records_late() {
    let mut g: Gather<()> = Gather::new(2);
    assert!(matches!(
        g.offer(0, NodeAnswer::Ok, (), |_| true),
        Progress::Decided(_)
    ));
    assert!(g.is_decided());
    assert_eq!(
        g.offer(1, NodeAnswer::Ok, (), |_| true),
        Progress::Late {
            node: 1,
            answer: NodeAnswer::Ok,
            fault: None,
            all_in: true
        }
    );
    assert!(g.all_in() && !g.faulted());
}

#[test]
fn gather_at_quorum_counts_every_node() {
    let mut g: Gather<()> = Gather::new(5);
    for i in 0..2 {
        g.offer(i, NodeAnswer::Ok, (), |_| false);
    }
    assert!(!g.at_quorum());
    g.offer(2, NodeAnswer::Ok, (), |_| false);
    assert!(g.at_quorum());
    assert_eq!(g.tally().nodes, 5);
}

// The packed calls both transports write.

#[test]
fn the_fast_eval_on_noscript_is_the_eval_redis_rs_packs() {
    let call = extend::call(LockKind::Plain, &["k".to_string()], "t", 30);
    let script = crate::core::transport::uvloop::owed::Script::packed(&call);
    assert_eq!(script.evalsha(), call.cmd(false).get_packed_command());
    assert_eq!(script.eval(), Some(call.cmd(true).get_packed_command()));
}

// Permits and fair lines.

#[test]
fn permits_granted_or_held_until_the_earliest_lease_ends() {
    let read = |r| permits::granted(r, "semaphore");
    assert_eq!(same(b"*1\r\n:1\r\n", read), NodeAnswer::Ok);
    assert_eq!(
        same(b"*2\r\n:0\r\n:250\r\n", read),
        NodeAnswer::Held { pttl_ms: Some(250) }
    );
    assert_eq!(
        same(b"*2\r\n:0\r\n:-1\r\n", read),
        NodeAnswer::Held { pttl_ms: None }
    );
    let answer = same(b"*0\r\n", read);
    assert!(error_text(&answer).starts_with("unexpected semaphore reply"));
}

#[test]
fn slots_granted_name_their_member() {
    assert_eq!(
        same(b"*3\r\n:1\r\n:2\r\n$3\r\nm:1\r\n", permits::slots),
        SlotReply::Granted("m:1".into())
    );
    assert_eq!(
        same(b"*2\r\n:0\r\n:40\r\n", permits::slots),
        SlotReply::Busy(Some(40))
    );
}

#[test]
fn slots_unreadable_replies_fail() {
    let SlotReply::Failed(answer) = same(b"*3\r\n:1\r\n:2\r\n$2\r\n\xff\xfe\r\n", permits::slots)
    else {
        panic!("not UTF-8")
    };
    assert_eq!(error_text(&answer), "semaphore member is not UTF-8");
    assert!(matches!(
        same(b":1\r\n", permits::slots),
        SlotReply::Failed(_)
    ));
    assert_eq!(
        permits::slots(Err(NodeAnswer::Timeout)),
        SlotReply::Failed(NodeAnswer::Timeout)
    );
}

#[test]
fn a_fair_release_is_ours_only_when_handed_on() {
    assert_eq!(same(b":1\r\n", permits::fair_released), NodeAnswer::Ok);
    assert_eq!(same(b":0\r\n", permits::fair_released), NodeAnswer::NotHeld);
}

// What the tokio side reads beyond RESP2 (a `resp3` URL's shared connection).

#[test]
fn resp3_values_read_as_their_resp2_shapes() {
    use crate::core::transport::tokio::reply::reply_of;
    use redis::Value;
    assert_eq!(reply_of(Value::Okay), Reply::Status("OK".into()));
    assert_eq!(reply_of(Value::Boolean(true)), Reply::Int(1));
    assert_eq!(
        reply_of(Value::Set(vec![Value::Int(1)])),
        Reply::Array(vec![Reply::Int(1)])
    );
    assert_eq!(
        reply_of(Value::Map(vec![(Value::Int(1), Value::Nil)])),
        Reply::Array(vec![Reply::Int(1), Reply::Nil])
    );
    assert!(matches!(reply_of(Value::Double(1.5)), Reply::Status(_)));
}

#[test]
fn a_noscript_server_error_value_is_noscript_on_tokio_too() {
    let value = redis::parse_redis_value(b"-NOSCRIPT No matching script\r\n").expect("parsed");
    assert_eq!(
        crate::core::transport::tokio::reply::reply_of(value),
        Reply::NoScript
    );
}

// The calls both transports write.

#[test]
fn a_call_knows_its_scripts_source() {
    let call = release::call(&["k".to_string()], "t", "");
    assert_eq!(call.source(), Some(scripts::source::RELEASE));
    let other = crate::core::ops::call::Call::new(&scripts::FAIR_LEAVE);
    assert_eq!(other.source(), Some(scripts::source::FAIR_LEAVE));
}

#[test]
fn a_call_as_another_scripts_eval_keeps_its_keys_and_args() {
    let call = extend::call(LockKind::Plain, &["k".to_string()], "t", 30);
    let packed = call.eval_with("return 1").get_packed_command();
    let text = String::from_utf8_lossy(&packed).into_owned();
    assert!(text.starts_with("*6\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n"));
    assert!(text.ends_with("$1\r\n1\r\n$1\r\nk\r\n$1\r\nt\r\n$2\r\n30\r\n"));
}

#[test]
fn a_script_without_source_has_no_eval_to_recover_with() {
    let script =
        crate::core::transport::uvloop::owed::Script::new(b"*1\r\n$4\r\nPING\r\n".to_vec(), "");
    assert_eq!(script.eval(), None);
}

#[test]
fn every_script_has_its_own_bit() {
    let bits: Vec<u32> = [
        &scripts::ACQUIRE,
        &scripts::RELEASE,
        &scripts::EXTEND,
        &scripts::RENEW,
        &scripts::SEM_ACQUIRE,
        &scripts::FAIR_LEAVE,
    ]
    .iter()
    .map(|s| scripts::source_of(s).expect("known").1)
    .collect();
    for (i, a) in bits.iter().enumerate() {
        assert_eq!(a.count_ones(), 1);
        assert!(bits[i + 1..].iter().all(|b| b != a));
    }
}

#[test]
fn gather_keeps_what_else_each_node_returned() {
    let mut g: Gather<i64> = Gather::new(3);
    g.offer(2, NodeAnswer::Ok, 7, |_| false);
    g.offer(0, NodeAnswer::Ok, 3, |_| false);
    let mut extras: Vec<i64> = g.extras().copied().collect();
    extras.sort_unstable();
    assert_eq!(extras, [3, 7]);
    assert_eq!(
        g.answers().as_slice(),
        [NodeAnswer::Ok, NodeAnswer::Pending, NodeAnswer::Ok]
    );
}

#[test]
fn late_answers_fill_in_their_own_operation_of_a_lock_only() {
    let record = std::sync::Arc::new(Answers::default());
    record.start(&[NodeAnswer::Timeout, NodeAnswer::Timeout]);
    let mut g: Gather<()> = Gather::new(2);
    let Progress::Decided(answers) = g.offer(0, NodeAnswer::Ok, (), |_| true) else {
        panic!("decided");
    };
    let late = LateAnswers::begin(record.clone(), &answers);
    assert_eq!(record.get(), [NodeAnswer::Ok, NodeAnswer::Pending]);
    let Progress::Late { node, answer, .. } = g.offer(1, NodeAnswer::NotHeld, (), |_| true) else {
        panic!("late");
    };
    late.put(node, answer);
    assert_eq!(record.get(), [NodeAnswer::Ok, NodeAnswer::NotHeld]);
    // A later operation's record is not touched by an older one's late answer.
    let older = LateAnswers::begin(record.clone(), &[NodeAnswer::Ok, NodeAnswer::Pending]);
    record.start(&[NodeAnswer::Timeout, NodeAnswer::Timeout]);
    older.put(1, NodeAnswer::Ok);
    assert_eq!(record.get(), [NodeAnswer::Timeout, NodeAnswer::Timeout]);
}
