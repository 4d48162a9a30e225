//! Redlock over three real, independent redis-servers: quorum acquisition,
//! reduced validity with a frozen node, fast quorum failure, contention and
//! renewal with nodes down.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use lockdog::core::engine::lock::Status;
use lockdog::core::{Client, ClientConfig, ErrorCode, Event, EventHook, NodeAnswer};
use tokio_util::sync::CancellationToken;

use support::redlock::{three, warm_up};
use support::{config, eventually, ms, opts, within};

fn key(cfg: &ClientConfig, name: &str) -> String {
    format!("{}{name}", cfg.key_prefix)
}

/// A client whose hook records node errors as `"host:port kind"`.
fn client_with_hook(cfg: ClientConfig) -> (Client, Arc<Mutex<Vec<String>>>) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = seen.clone();
    let hook: EventHook = Arc::new(move |e: Event<'_>| {
        let line = match e {
            Event::NodeError { node, answer, .. } => format!("{node} {}", answer.kind()),
            Event::Lost { id, .. } => format!("lost {id}"),
            _ => return,
        };
        if let Ok(mut v) = sink.lock() {
            v.push(line);
        }
    });
    (
        Client::new(cfg, Some(hook)).expect("valid client config"),
        seen,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_sets_the_key_on_every_node() {
    let servers = three();
    let cfg = config(&[&servers[0], &servers[1], &servers[2]]);
    let k = key(&cfg, "res");
    let locks = Client::new(cfg, None).expect("valid config");
    assert_eq!(
        locks.node_names(),
        servers.iter().map(|s| s.name()).collect::<Vec<_>>()
    );
    let lock = locks
        .acquire(vec!["res".into()], &opts(10_000), CancellationToken::new())
        .await
        .expect("acquired");
    for s in &servers {
        assert_eq!(
            s.get(&k).await.as_deref(),
            Some(lock.token()),
            "{}",
            s.name()
        );
        let pttl = s.pttl(&k).await;
        assert!(
            (9_000..=10_000).contains(&pttl),
            "{}: PTTL {pttl}",
            s.name()
        );
    }
    // drift = 10000 × 0.01 + 2 ms
    assert!(lock.remaining() <= ms(10_000 - 102));
    assert!(lock.remaining() > ms(9_000));
    assert!(lock.release().await.expect("released"));
    for s in &servers {
        assert_eq!(s.get(&k).await, None, "{} released", s.name());
    }
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_node_does_not_hold_up_a_quorum_and_is_still_reported() {
    let mut servers = three();
    let cfg = config(&[&servers[0], &servers[1], &servers[2]]);
    let k = key(&cfg, "res");
    let (locks, seen) = client_with_hook(cfg);
    warm_up(&locks).await;

    servers[2].pause();
    let ttl = ms(4_000);
    // With several nodes, each gets 5% of the ttl to answer: 200 ms here.
    let node_timeout = ms(200);
    let drift = ms(4_000 / 100 + 2);
    let began = Instant::now();
    let result = locks
        .acquire(vec!["res".into()], &opts(4_000), CancellationToken::new())
        .await;
    let took = began.elapsed();
    let lock = result
        .map_err(|e| e.to_string())
        .expect("2 of 3 is a quorum");
    // The outcome was decided by the two live nodes: the frozen one is not waited for.
    assert!(
        took < node_timeout,
        "resolved at quorum, before the frozen node's timeout: {took:?}"
    );
    let remaining = lock.remaining();
    assert!(remaining <= ttl - drift, "validity: {remaining:?}");
    assert!(
        remaining > ttl - drift - node_timeout,
        "validity does not pay for the frozen node: {remaining:?}"
    );
    for s in &servers[..2] {
        assert_eq!(
            s.get(&k).await.as_deref(),
            Some(lock.token()),
            "{}",
            s.name()
        );
    }
    // The straggler is finished in the background and its fault still reported.
    let expected = [format!("{} timeout", servers[2].name())];
    eventually(ms(2_000), "the frozen node's timeout reported", || async {
        *seen.lock().expect("hook mutex") == expected
    })
    .await;
    servers[2].resume();

    assert!(lock.release().await.expect("released"));
    // The frozen node ran the SET once resumed, then the release after it.
    for s in &servers {
        eventually(ms(2_000), "every node released", || async {
            s.get(&k).await.is_none()
        })
        .await;
    }
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_resolves_at_quorum_and_close_waits_for_the_minority() {
    let mut servers = three();
    let cfg = config(&[&servers[0], &servers[1], &servers[2]]);
    let k = key(&cfg, "res");
    let (locks, seen) = client_with_hook(cfg);
    warm_up(&locks).await;
    let lock = locks
        .acquire(vec!["res".into()], &opts(60_000), CancellationToken::new())
        .await
        .expect("acquired");
    servers[2].pause();
    let began = Instant::now();
    assert!(lock.release().await.expect("a quorum released it"));
    let took = began.elapsed();
    assert!(
        took < ms(500),
        "release did not wait for the frozen node: {took:?}"
    );
    for s in &servers[..2] {
        assert_eq!(s.get(&k).await, None, "{} released", s.name());
    }
    // close() waits for the minority's release to end (here: its timeout).
    let began = Instant::now();
    locks.close().await;
    assert!(
        began.elapsed() + took >= ms(900),
        "close() waited for the straggler's release: {:?}",
        began.elapsed() + took
    );
    assert_eq!(
        *seen.lock().expect("hook mutex"),
        [format!("{} timeout", servers[2].name())],
        "the straggler's fault was reported"
    );
    servers[2].resume();
    // The release was on its way: the frozen node deletes the key when it resumes.
    eventually(ms(2_000), "the minority released", || async {
        servers[2].get(&k).await.is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_down_fails_fast_with_quorum_and_leaves_no_key() {
    let mut servers = three();
    let cfg = config(&[&servers[0], &servers[1], &servers[2]]);
    let k = key(&cfg, "res");
    let (locks, seen) = client_with_hook(cfg.clone());
    warm_up(&locks).await;
    servers[1].kill();
    servers[2].kill();

    // One attempt (retryCount 0): failed at once.
    let mut o = opts(2_000);
    o.wait_timeout = Some(ms(10_000));
    o.retry_count = Some(Some(0));
    let began = Instant::now();
    let err = locks
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .err()
        .expect("1 of 3 is no quorum");
    let took = began.elapsed();
    assert_eq!(err.code, ErrorCode::Quorum, "{err}");
    assert!(took < ms(1_000), "failed fast, not after waiting: {took:?}");
    assert_eq!(err.attempts, 1, "one attempt");
    assert_eq!(err.key.as_deref(), Some("res"));
    assert_eq!(err.nodes.len(), 3);
    assert_eq!(err.nodes[0].node, servers[0].name());
    assert_eq!(err.nodes[0].answer, NodeAnswer::Ok);
    for (report, server) in err.nodes[1..].iter().zip(&servers[1..]) {
        assert_eq!(report.node, server.name());
        assert!(report.answer.is_fault(), "{report:?}");
        assert!(err.message.contains(&server.name()), "{}", err.message);
    }
    // The undo of a failed attempt runs in the background, bounded by the node timeout.
    eventually(ms(2_000), "the healthy node's key undone", || async {
        servers[0].get(&k).await.is_none()
    })
    .await;
    assert!(seen.lock().expect("hook mutex").len() >= 2);

    // A client that never connected fails just as fast.
    let fresh = Client::new(cfg, None).expect("valid config");
    let began = Instant::now();
    let err = fresh
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .err()
        .expect("no quorum");
    assert_eq!(err.code, ErrorCode::Quorum);
    assert!(began.elapsed() < ms(1_500), "took {:?}", began.elapsed());
    eventually(ms(2_000), "the healthy node's key undone", || async {
        servers[0].get(&k).await.is_none()
    })
    .await;
    // A budget: the outage is retried until it ends, then the quorum error.
    let mut waiting = opts(2_000);
    waiting.wait_timeout = Some(ms(600));
    waiting.retry_delay = Some(ms(20));
    waiting.retry_jitter = Some(ms(0));
    let began = Instant::now();
    let err = locks
        .acquire(vec!["res".into()], &waiting, CancellationToken::new())
        .await
        .err()
        .expect("1 of 3 is no quorum");
    let took = began.elapsed();
    assert_eq!(err.code, ErrorCode::Quorum, "{err}");
    assert!(err.attempts > 1, "retried: {} attempt(s)", err.attempts);
    assert!(
        err.message.contains("waitTimeout of 600 ms passed"),
        "{err}"
    );
    assert!(
        took >= ms(590) && took < ms(600 + 450),
        "gave up after {took:?}"
    );
    eventually(ms(2_000), "the healthy node's key undone", || async {
        servers[0].get(&k).await.is_none()
    })
    .await;
    locks.close().await;
    fresh.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_on_a_majority_is_taken_on_a_minority_is_not() {
    let servers = three();
    let cfg = config(&[&servers[0], &servers[1], &servers[2]]);
    let (a, b) = (key(&cfg, "a"), key(&cfg, "b"));
    let locks = Client::new(cfg, None).expect("valid config");

    // Another owner holds "a" on two nodes: no quorum for us.
    for s in &servers[..2] {
        s.query::<()>(redis::cmd("SET").arg(&a).arg("other").arg("PX").arg(5_000))
            .await;
    }
    let mut o = opts(5_000);
    o.retry_count = Some(Some(0));
    let err = locks
        .acquire(vec!["a".into()], &o, CancellationToken::new())
        .await
        .err()
        .expect("held on a majority");
    assert_eq!(err.code, ErrorCode::Taken, "{err}");
    let remaining = err.remaining_ms.expect("holder's PTTL");
    assert!((4_000..=5_000).contains(&remaining), "{remaining}");
    eventually(ms(2_000), "what we set on the free node undone", || async {
        servers[2].get(&a).await.is_none()
    })
    .await;
    for s in &servers[..2] {
        assert_eq!(s.get(&a).await.as_deref(), Some("other"));
    }

    // Held on one node only: 2 of 3 is enough, the foreign key is left alone.
    servers[0].set(&b, "other").await;
    let lock = locks
        .acquire(vec!["b".into()], &o, CancellationToken::new())
        .await
        .map_err(|e| e.to_string())
        .expect("a majority is free");
    assert_eq!(servers[0].get(&b).await.as_deref(), Some("other"));
    for s in &servers[1..] {
        assert_eq!(s.get(&b).await.as_deref(), Some(lock.token()));
    }
    assert!(lock.release().await.expect("released on a quorum"));
    assert_eq!(servers[0].get(&b).await.as_deref(), Some("other"));
    for s in &servers[1..] {
        assert_eq!(s.get(&b).await, None);
    }
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_node_does_not_hold_back_the_watchdog() {
    // A node timeout of half the TTL: a renewal that waited for the paused
    // node would take 1 s, and the next one would be answered after the
    // lease it renews had run out.
    let mut servers = three();
    let mut cfg = config(&[&servers[0], &servers[1], &servers[2]]);
    cfg.node_timeout = Some(ms(1_000));
    let k = key(&cfg, "res");
    let (locks, seen) = client_with_hook(cfg);
    warm_up(&locks).await;
    let lock = locks
        .acquire(vec!["res".into()], &opts(2_000), CancellationToken::new())
        .await
        .expect("acquired");
    servers[2].pause();
    let paused = Instant::now();
    let mut least = ms(2_000);
    while paused.elapsed() < ms(5_000) {
        assert!(
            lock.is_held(),
            "lost {:?} after the pause: {:?}",
            paused.elapsed(),
            lock.loss().map(|e| e.message)
        );
        least = least.min(lock.remaining());
        tokio::time::sleep(ms(50)).await;
    }
    // Renewed at the live nodes' answers: never down to the last of the lease.
    assert!(least > ms(300), "validity fell to {least:?}");
    for s in &servers[..2] {
        assert!(s.pttl(&k).await > 700, "{} renewed", s.name());
    }
    let expected = format!("{} timeout", servers[2].name());
    assert!(
        seen.lock().expect("hook mutex").contains(&expected),
        "the paused node's timeouts are reported"
    );
    servers[2].resume();
    assert!(lock.release().await.expect("released"));
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_needs_a_quorum_of_nodes() {
    let mut servers = three();
    let mut cfg = config(&[&servers[0], &servers[1], &servers[2]]);
    // The derived per-node budget (5% of 600 ms = 30 ms) is tight on a loaded
    // test machine; this test is about quorum, not about slow nodes.
    cfg.node_timeout = Some(ms(150));
    let k = key(&cfg, "res");
    let (locks, seen) = client_with_hook(cfg);
    let lock = locks
        .acquire(vec!["res".into()], &opts(600), CancellationToken::new())
        .await
        .expect("acquired");

    // One node's key deleted: the other two keep renewing.
    servers[0].del(&k).await;
    // Holding past the ttl is the test.
    tokio::time::sleep(ms(700)).await;
    assert!(lock.is_held(), "one missing key of three does not lose it");
    // That node dies outright: the other two still make 2 of 3.
    servers[0].kill();
    tokio::time::sleep(ms(700)).await;
    assert!(lock.is_held(), "one dead node of three does not lose it");
    for s in &servers[1..] {
        assert_eq!(s.get(&k).await.as_deref(), Some(lock.token()));
    }

    // A second node down: no renewal can reach a quorum, validity runs out.
    servers[1].kill();
    let down = Instant::now();
    within(ms(600 + 400), "loss without a quorum", lock.ended()).await;
    // The last quorum renewal was before `down`, so its validity (at most the
    // 600 ms ttl) ends before down + 600; the slack is for a loaded machine's
    // timer and scheduling delay, well under one more renew interval (200 ms).
    assert!(
        down.elapsed() <= ms(600 + 100),
        "ended {:?} after",
        down.elapsed()
    );
    assert_eq!(lock.status(), Status::Lost);
    assert_eq!(lock.loss().map(|e| e.code), Some(ErrorCode::Lost));
    let lost_line = format!("lost {}", lock.id());
    eventually(ms(500), "the hook saw the Lost event", || async {
        seen.lock().expect("hook mutex").contains(&lost_line)
    })
    .await;
    let seen = seen.lock().expect("hook mutex").clone();
    assert!(
        seen.iter().any(|l| l.starts_with(&servers[0].name())),
        "node errors reported: {seen:?}"
    );
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_deleted_on_a_majority_lose_the_lock() {
    let servers = three();
    let cfg = config(&[&servers[0], &servers[1], &servers[2]]);
    let k = key(&cfg, "res");
    let locks = Client::new(cfg, None).expect("valid config");
    let mut o = opts(3_000);
    o.renew_interval = Some(ms(100));
    let lock = locks
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .expect("acquired");
    servers[0].del(&k).await;
    servers[1].del(&k).await;
    within(ms(600), "loss detection", lock.ended()).await;
    let loss = lock.loss().expect("lost");
    assert!(loss.message.contains("deleted"), "{}", loss.message);
    assert_eq!(loss.nodes.len(), 3);
    // Token-checked release after the loss clears the last node too.
    eventually(ms(1_000), "the remaining key is released", || async {
        servers[2].get(&k).await.is_none()
    })
    .await;
    locks.close().await;
}
