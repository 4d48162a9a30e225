//! Every verdict, for one, three and five nodes, with its edge cases.

use super::*;

const OK: NodeAnswer = NodeAnswer::Ok;
const NOT: NodeAnswer = NodeAnswer::NotHeld;
const TIMEOUT: NodeAnswer = NodeAnswer::Timeout;

fn held(ms: u64) -> NodeAnswer {
    NodeAnswer::Held { pttl_ms: Some(ms) }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_majority_is_needed() {
    assert_eq!(needed(1), 1);
    assert_eq!(needed(2), 2);
    assert_eq!(needed(3), 2);
    assert_eq!(needed(4), 3);
    assert_eq!(needed(5), 3);
}

#[test]
fn answers_are_counted() {
    let t = Tally::of(&[OK, held(5), held(9), NOT, TIMEOUT]);
    assert_eq!((t.nodes, t.ok, t.held, t.not_held), (5, 1, 2, 1));
    assert_eq!(t.longest_pttl, Some(9));
    assert_eq!(
        Tally::of(&[NodeAnswer::Held { pttl_ms: None }]).longest_pttl,
        None
    );
}

#[test]
fn drift_and_validity() {
    assert_eq!(drift(ms(10_000), 0.01), ms(102));
    assert_eq!(drift(ms(0), 0.01), ms(2));
    assert_eq!(drift(ms(1_000), 0.0), ms(2));
    assert_eq!(validity(ms(1_000), ms(100), ms(12)), ms(888));
    // Exactly used up, and over-spent: zero, never a wrap-around.
    assert_eq!(validity(ms(1_000), ms(988), ms(12)), Duration::ZERO);
    assert_eq!(validity(ms(1_000), ms(2_000), ms(12)), Duration::ZERO);
    assert_eq!(validity(ms(10), ms(0), ms(12)), Duration::ZERO);
    // The longest lease does not overflow.
    let max = Duration::from_millis((1 << 53) - 1);
    assert!(drift(max, 0.49) < max);
    assert!(drift(Duration::MAX, 0.49) < Duration::MAX);
}

#[test]
fn acquire_verdicts_on_one_node() {
    let t = |a: NodeAnswer| Tally::of(&[a]);
    assert_eq!(acquired(&t(OK), ms(10), ms(1)), Acquired::Won);
    // The edge: exactly the validity asked for still wins; one ms less does not.
    assert_eq!(acquired(&t(OK), ms(5), ms(5)), Acquired::Won);
    assert_eq!(acquired(&t(OK), ms(4), ms(5)), Acquired::TooLate);
    assert_eq!(acquired(&t(OK), Duration::ZERO, ms(1)), Acquired::TooLate);
    assert_eq!(
        acquired(&t(held(7)), ms(10), ms(1)),
        Acquired::Contended {
            longest_pttl: Some(7)
        }
    );
    assert_eq!(acquired(&t(NOT), ms(10), ms(1)), Acquired::NoQuorum);
    assert_eq!(acquired(&t(TIMEOUT), ms(10), ms(1)), Acquired::NoQuorum);
}

#[test]
fn acquire_verdicts_on_three_and_five_nodes() {
    let v = ms(100);
    let min = ms(1);
    assert_eq!(
        acquired(&Tally::of(&[OK, OK, TIMEOUT]), v, min),
        Acquired::Won
    );
    assert_eq!(
        acquired(&Tally::of(&[OK, OK, held(3)]), v, min),
        Acquired::Won
    );
    assert_eq!(
        acquired(&Tally::of(&[OK, held(3), TIMEOUT]), v, min),
        Acquired::Contended {
            longest_pttl: Some(3)
        }
    );
    assert_eq!(
        acquired(&Tally::of(&[OK, TIMEOUT, TIMEOUT]), v, min),
        Acquired::NoQuorum
    );
    // A quorum too late, with another owner seen: contention wins, so it is retried.
    assert_eq!(
        acquired(&Tally::of(&[OK, OK, held(1)]), Duration::ZERO, min),
        Acquired::Contended {
            longest_pttl: Some(1)
        }
    );
    assert_eq!(
        acquired(&Tally::of(&[OK, OK, OK, TIMEOUT, TIMEOUT]), v, min),
        Acquired::Won
    );
    assert_eq!(
        acquired(&Tally::of(&[OK, OK, TIMEOUT, TIMEOUT, TIMEOUT]), v, min),
        Acquired::NoQuorum
    );
    // A tie of two against two (the fifth silent) wins nothing.
    assert_eq!(
        acquired(&Tally::of(&[OK, OK, held(4), held(9), TIMEOUT]), v, min),
        Acquired::Contended {
            longest_pttl: Some(9)
        }
    );
}

#[test]
fn renew_verdicts() {
    assert_eq!(renewed(&Tally::of(&[OK]), true), Renewed::Renewed);
    assert_eq!(renewed(&Tally::of(&[OK]), false), Renewed::TooLate);
    assert_eq!(renewed(&Tally::of(&[NOT]), true), Renewed::Lost);
    assert_eq!(renewed(&Tally::of(&[held(1)]), true), Renewed::Lost);
    assert_eq!(renewed(&Tally::of(&[TIMEOUT]), true), Renewed::NoQuorum);
    // Three nodes: one missing key is survivable, two are a loss.
    assert_eq!(renewed(&Tally::of(&[OK, OK, NOT]), true), Renewed::Renewed);
    assert_eq!(
        renewed(&Tally::of(&[OK, NOT, TIMEOUT]), true),
        Renewed::NoQuorum
    );
    assert_eq!(renewed(&Tally::of(&[OK, NOT, NOT]), true), Renewed::Lost);
    assert_eq!(
        renewed(&Tally::of(&[OK, NOT, held(2)]), true),
        Renewed::Lost
    );
    // Five nodes: two gone is not yet a loss, three is.
    assert_eq!(
        renewed(&Tally::of(&[OK, NOT, NOT, TIMEOUT, TIMEOUT]), true),
        Renewed::NoQuorum
    );
    assert_eq!(
        renewed(&Tally::of(&[OK, NOT, NOT, held(1), TIMEOUT]), true),
        Renewed::Lost
    );
    assert_eq!(
        renewed(&Tally::of(&[OK, OK, OK, NOT, NOT]), false),
        Renewed::TooLate
    );
}

#[test]
fn the_lost_rule_is_the_complement_of_a_possible_quorum() {
    // Lost exactly when the nodes not saying "gone" can no longer make a quorum.
    for n in [1usize, 2, 3, 4, 5] {
        for gone in 0..=n {
            let mut answers = vec![NOT; gone];
            answers.resize(n, TIMEOUT);
            let t = Tally::of(&answers);
            assert_eq!(t.lost(), n - gone < needed(n), "n={n} gone={gone}");
        }
    }
}

#[test]
fn release_verdicts() {
    assert_eq!(released(&Tally::of(&[OK])), Released::Released);
    assert_eq!(released(&Tally::of(&[NOT])), Released::NotOurs);
    assert_eq!(released(&Tally::of(&[TIMEOUT])), Released::NoQuorum);
    // Ours on one node, gone on one, the third silent: it may have been ours
    // on a quorum up to the release (the lost-lock rule of a renewal).
    assert_eq!(
        released(&Tally::of(&[OK, NOT, TIMEOUT])),
        Released::NoQuorum
    );
    assert_eq!(released(&Tally::of(&[OK, NOT, NOT])), Released::NotOurs);
    assert_eq!(
        released(&Tally::of(&[NOT, NOT, TIMEOUT])),
        Released::NotOurs
    );
    assert_eq!(released(&Tally::of(&[OK, OK, NOT])), Released::Released);
    assert_eq!(
        released(&Tally::of(&[OK, TIMEOUT, TIMEOUT])),
        Released::NoQuorum
    );
    assert_eq!(
        released(&Tally::of(&[OK, OK, NOT, TIMEOUT, TIMEOUT])),
        Released::NoQuorum
    );
    assert_eq!(
        released(&Tally::of(&[OK, OK, NOT, NOT, NOT])),
        Released::NotOurs
    );
}

#[test]
fn reached_counts_usable_answers() {
    assert!(reached(&[NOT]));
    assert!(!reached(&[TIMEOUT]));
    assert!(reached(&[OK, NOT, TIMEOUT]));
    assert!(!reached(&[OK, TIMEOUT, TIMEOUT]));
    assert!(reached(&[OK, OK, NOT, TIMEOUT, TIMEOUT]));
    assert!(!reached(&[OK, OK, TIMEOUT, TIMEOUT, TIMEOUT]));
}

#[test]
fn the_holder_is_the_value_a_quorum_agrees_on() {
    let v = |s: &str, p: i64| (s.to_string(), p);
    assert_eq!(holder(&[v("a", 9)], 1), Some(("a", 9)));
    assert_eq!(holder(&[], 1), None);
    assert_eq!(
        holder(&[v("a", 9), v("a", 5), v("b", 7)], 3),
        Some(("a", 5))
    );
    assert_eq!(
        holder(&[v("a", 9), v("b", 7)], 3),
        None,
        "a tie is no holder"
    );
    assert_eq!(holder(&[v("a", 9)], 3), None);
    assert_eq!(
        holder(&[v("a", 1), v("b", 2), v("b", 3), v("a", 4), v("b", 5)], 5),
        Some(("b", 2))
    );
    assert_eq!(
        holder(&[v("a", 1), v("b", 2), v("b", 3), v("a", 4)], 5),
        None
    );
}

#[test]
fn one_node_reports_its_own_fault_and_several_a_quorum_error() {
    let report = |node: &str, answer: NodeAnswer| NodeReport {
        node: node.into(),
        answer,
    };
    let err = no_quorum(vec![report("h:1", TIMEOUT)], || unreachable!());
    assert_eq!(err.code, ErrorCode::Connection);
    assert_eq!(err.message, "Redis at h:1: timed out");
    assert_eq!(err.nodes.len(), 1);
    let err = no_quorum(
        vec![report("h:1", NodeAnswer::ErrorReply("OOM no".into()))],
        || unreachable!(),
    );
    assert_eq!(err.code, ErrorCode::Redis);
    // A redirection to a master that died, a cluster or master down, a node
    // turned replica: the master was out of reach. A refusal is Redis's own.
    let connection = ErrorCode::Connection;
    for (text, code) in [
        ("MOVED 3999 127.0.0.1:6381", connection),
        ("ASK 3999 127.0.0.1:6381", connection),
        ("CLUSTERDOWN The cluster is down", connection),
        (
            "TRYAGAIN Multiple keys request during rehashing of slot",
            connection,
        ),
        ("MASTERDOWN Link with MASTER is down", connection),
        (
            "READONLY You can't write against a read only replica.",
            connection,
        ),
        ("LOADING Redis is loading the dataset in memory", connection),
        ("NOPERM no", ErrorCode::Redis),
        ("BUSY Redis is busy running a script.", ErrorCode::Redis),
        ("ERR Error running script", ErrorCode::Redis),
    ] {
        let err = no_quorum(
            vec![report("h:1", NodeAnswer::ErrorReply(text.into()))],
            || unreachable!(),
        );
        assert_eq!(err.code, code, "{text}");
        assert!(err.message.contains(text), "{}", err.message);
    }
    let err = no_quorum(
        vec![
            report("h:1", OK),
            report("h:2", TIMEOUT),
            report("h:3", TIMEOUT),
        ],
        || "1 of 3".into(),
    );
    assert_eq!(err.code, ErrorCode::Quorum);
    assert_eq!(err.message, "1 of 3");
    assert_eq!(err.nodes.len(), 3);
}

#[test]
fn an_outage_is_worth_retrying_a_permanent_error_is_not() {
    let down = || NodeAnswer::Unreachable("Connection refused (os error 111)".into());
    let reply = |text: &str| NodeAnswer::ErrorReply(text.into());
    // One node: refused, silent, loading, read-only after a failover, a slot moving.
    for a in [
        down(),
        TIMEOUT,
        reply("LOADING Redis is loading the dataset in memory"),
        reply("READONLY You can't write against a read only replica."),
        reply("MOVED 3999 127.0.0.1:6381"),
        reply("TRYAGAIN Multiple keys request during rehashing of slot"),
        reply("CLUSTERDOWN The cluster is down"),
        reply("MASTERDOWN Link with MASTER is down"),
        reply("BUSY Redis is busy running a script."),
        NodeAnswer::Unreachable("no master through the sentinels within 300 ms".into()),
    ] {
        assert!(a.is_transient(), "{a}");
        assert!(worth_retrying(&[a]));
    }
    // Errors that come back the same on every attempt.
    for a in [
        reply("NOPERM User has no permissions to run the 'evalsha' command"),
        reply("WRONGTYPE Operation against a key holding the wrong kind of value"),
        reply("ERR Error running script"),
        NodeAnswer::Unreachable("invalid peer certificate: UnknownIssuer".into()),
        NodeAnswer::Unreachable("received fatal alert: CertificateRequired".into()),
    ] {
        assert!(!a.is_transient(), "{a}");
        assert!(!worth_retrying(&[a]));
    }
    assert!(!OK.is_transient() && !NOT.is_transient() && !held(1).is_transient());
    // Redlock: worth retrying while the nodes that may recover can still make a quorum.
    let noperm = reply("NOPERM no");
    assert!(worth_retrying(&[OK, down(), TIMEOUT]));
    assert!(worth_retrying(&[OK, noperm.clone(), down()]));
    assert!(!worth_retrying(&[down(), noperm.clone(), noperm.clone()]));
    assert!(worth_retrying(&[OK, OK, noperm.clone(), down(), down()]));
    assert!(!worth_retrying(&[
        OK,
        down(),
        noperm.clone(),
        noperm.clone(),
        noperm
    ]));
}
