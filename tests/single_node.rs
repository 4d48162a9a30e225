//! The lock against one real redis-server: acquire, release, extend, contention,
//! waiting, cancellation, multi-key locks, close and bad input.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use lockdog::core::engine::lock::Status;
use lockdog::core::{Client, ClientConfig, ErrorCode, NodeAnswer};
use tokio_util::sync::CancellationToken;

use support::{config, ms, one_node, opts, unrenewed, waiting, within, RedisServer};

fn client(cfg: ClientConfig) -> Client {
    Client::new(cfg, None).expect("valid client config")
}

fn key(cfg: &ClientConfig, name: &str) -> String {
    format!("{}{name}", cfg.key_prefix)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_sets_the_token_with_a_px_ttl_and_release_deletes_it() {
    let (server, locks, k) = one_node("res");

    let lock = locks
        .acquire(vec!["res".into()], &opts(5_000), CancellationToken::new())
        .await
        .expect("a free key is acquired");
    assert_eq!(server.get(&k).await.as_deref(), Some(lock.token()));
    let pttl = server.pttl(&k).await;
    assert!(
        (4_000..=5_000).contains(&pttl),
        "PX ttl set, got PTTL {pttl}"
    );
    assert!(lock.is_held());
    assert_eq!(lock.status(), Status::Held);
    assert_eq!(lock.names(), ["res".to_string()]);
    assert_eq!(lock.attempts(), 1);
    let remaining = lock.remaining();
    // validity = ttl - elapsed - drift (5000 * 0.01 + 2 = 52 ms)
    assert!(
        remaining <= ms(4_948) && remaining > ms(4_500),
        "remaining {remaining:?}"
    );

    assert!(lock.release().await.expect("release succeeds"));
    assert_eq!(server.get(&k).await, None, "release deletes the key");
    assert_eq!(lock.status(), Status::Released);
    assert!(!lock.is_held());
    assert_eq!(lock.remaining(), Duration::ZERO);
    within(ms(100), "ended() after release", lock.ended()).await;
    assert!(
        !lock
            .release()
            .await
            .expect("second release is not an error"),
        "a second release reports false"
    );

    let stats = locks.stats();
    assert_eq!((stats.acquired, stats.released, stats.held), (1, 1, 0));
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_is_token_checked() {
    let (server, locks, k) = one_node("res");
    let o = unrenewed(5_000);
    let lock = locks
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .expect("acquired");
    server.set(&k, "someone-else").await;

    assert!(
        !lock.release().await.expect("release answers"),
        "a key holding a foreign token is not ours to release"
    );
    assert_eq!(
        server.get(&k).await.as_deref(),
        Some("someone-else"),
        "the foreign value is not deleted"
    );
    assert_eq!(locks.stats().released, 0);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_rearms_the_ttl_and_the_watchdog_keeps_the_new_lease() {
    let (server, locks, k) = one_node("res");
    let lock = locks
        .acquire(vec!["res".into()], &opts(300), CancellationToken::new())
        .await
        .expect("acquired");
    lock.extend(ms(3_000)).await.expect("extend a held lock");
    assert!(server.pttl(&k).await > 2_500, "extend set the new PX ttl");
    assert!(lock.remaining() > ms(2_500), "{:?}", lock.remaining());
    assert_eq!(lock.ttl(), ms(3_000), "the new lease is what gets renewed");

    // The watchdog now renews every 1000 ms to 3000 ms: 1.3 s later a renewal has
    // re-armed the key (without one it would have ~1700 ms left).
    tokio::time::sleep(ms(1_300)).await;
    let pttl = server.pttl(&k).await;
    assert!(pttl > 2_000, "renewed with the extended ttl, PTTL {pttl}");
    assert_eq!(server.get(&k).await.as_deref(), Some(lock.token()));

    assert!(lock.release().await.expect("released"));
    let err = lock
        .extend(ms(3_000))
        .await
        .expect_err("a released lock cannot be extended");
    assert_eq!(err.code, ErrorCode::Lost);
    assert_eq!(
        server.get(&k).await,
        None,
        "extend after release creates nothing"
    );
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_never_recreates_a_deleted_key() {
    let (server, locks, k) = one_node("res");
    let o = unrenewed(5_000);
    let lock = locks
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .expect("acquired");
    assert_eq!(server.del(&k).await, 1);

    let err = lock
        .extend(ms(10_000))
        .await
        .expect_err("extending a deleted lock fails");
    assert_eq!(err.code, ErrorCode::Lost, "{err}");
    assert_eq!(err.key.as_deref(), Some("res"));
    assert_eq!(server.pttl(&k).await, -2, "the key is still absent");
    assert_eq!(lock.status(), Status::Lost);
    assert_eq!(lock.loss().map(|e| e.code), Some(ErrorCode::Lost));
    within(ms(100), "ended() after a failed extend", lock.ended()).await;
    // The loss also released (token-checked) everywhere: still nothing there.
    tokio::time::sleep(ms(50)).await;
    assert_eq!(server.pttl(&k).await, -2);
    assert_eq!(locks.stats().lost, 1);
    assert_eq!(locks.stats().held, 0);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_of_a_foreign_key_is_lost_and_leaves_the_foreign_value() {
    let (server, locks, k) = one_node("res");
    let o = unrenewed(5_000);
    let lock = locks
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .expect("acquired");
    server
        .query::<()>(redis::cmd("SET").arg(&k).arg("other").arg("PX").arg(4_000))
        .await;
    let err = lock
        .extend(ms(60_000))
        .await
        .expect_err("not ours any more");
    assert_eq!(err.code, ErrorCode::Lost);
    assert_eq!(server.get(&k).await.as_deref(), Some("other"));
    let pttl = server.pttl(&k).await;
    assert!(pttl <= 4_000, "the foreign key's TTL is untouched: {pttl}");
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_fails_with_taken_and_the_holders_remaining_ttl() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let holder = client(cfg.clone());
    let other = client(cfg.clone());
    let held = holder
        .acquire(vec!["res".into()], &opts(5_000), CancellationToken::new())
        .await
        .expect("acquired");

    assert!(
        other
            .try_acquire(vec!["res".into()], &opts(5_000))
            .await
            .expect("try_acquire answers")
            .is_none(),
        "try_acquire of a held lock is None"
    );

    let mut o = opts(5_000);
    o.retry_count = Some(Some(2));
    o.retry_delay = Some(ms(20));
    o.retry_jitter = Some(ms(0));
    let err = other
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .err()
        .expect("held by another");
    assert_eq!(err.code, ErrorCode::Taken, "{err}");
    assert_eq!(err.attempts, 3, "first attempt plus two retries");
    assert_eq!(err.key.as_deref(), Some("res"));
    let remaining = err.remaining_ms.expect("the holder's PTTL is reported");
    // The holder's watchdog renews every ttl/3, and a waiter that hears release
    // notices pauses until the lease's end: the last attempt may read any PTTL
    // down to two thirds of the TTL (less a little for the renewal's round trip).
    assert!(
        (3_000..=5_000).contains(&remaining),
        "remaining_ms {remaining}"
    );
    assert_eq!(err.nodes.len(), 1);
    assert_eq!(err.nodes[0].node, server.name());
    assert!(matches!(err.nodes[0].answer, NodeAnswer::Held { .. }));
    assert!(other.stats().contended >= 3);
    assert_eq!(
        server.get(&key(&cfg, "res")).await.as_deref(),
        Some(held.token()),
        "the holder's key is untouched"
    );
    holder.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_timeout_fails_with_timeout() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let holder = client(cfg.clone());
    let other = client(cfg);
    let _held = holder
        .acquire(vec!["res".into()], &opts(5_000), CancellationToken::new())
        .await
        .expect("acquired");

    let o = waiting(5_000, 300, 50, 0);
    let began = Instant::now();
    let err = other
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .err()
        .expect("never free within the wait");
    let waited = began.elapsed();
    assert_eq!(err.code, ErrorCode::Timeout, "{err}");
    assert!(
        waited >= ms(300) && waited < ms(1_000),
        "waited {waited:?} for a 300 ms waitTimeout"
    );
    // The first pause is retryDelay (before the release notices are heard), the
    // next lasts to the end of the wait: no attempt is begun past it.
    assert!(err.attempts >= 2, "retried while waiting: {}", err.attempts);
    assert!(err.remaining_ms.is_some());
    holder.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_gets_the_lock_when_the_holder_releases_or_expires() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let holder = client(cfg.clone());
    let waiter = client(cfg.clone());

    // Released by the holder while the waiter retries.
    let held = holder
        .acquire(vec!["a".into()], &opts(5_000), CancellationToken::new())
        .await
        .expect("acquired");
    let release = tokio::spawn(async move {
        tokio::time::sleep(ms(200)).await;
        held.release().await
    });
    let o = waiting(5_000, 3_000, 30, 10);
    let began = Instant::now();
    let lock = waiter
        .acquire(vec!["a".into()], &o, CancellationToken::new())
        .await
        .expect("acquired once released");
    assert!(began.elapsed() >= ms(150), "{:?}", began.elapsed());
    assert!(release.await.expect("release task").expect("released"));
    assert_eq!(
        server.get(&key(&cfg, "a")).await.as_deref(),
        Some(lock.token())
    );

    // Expiring by TTL: the waiter retries right after the holder's PTTL, not
    // after its much longer retry delay.
    let mut short = opts(300);
    short.auto_renew = Some(false);
    let _stale = holder
        .acquire(vec!["b".into()], &short, CancellationToken::new())
        .await
        .expect("acquired");
    let o = waiting(5_000, 5_000, 3_000, 0);
    let began = Instant::now();
    let lock = waiter
        .acquire(vec!["b".into()], &o, CancellationToken::new())
        .await
        .expect("acquired once the holder's key expired");
    let waited = began.elapsed();
    assert!(
        waited >= ms(200) && waited < ms(1_500),
        "waited {waited:?}: the pause is capped by the holder's PTTL"
    );
    assert_eq!(lock.attempts(), 2);
    holder.close().await;
    waiter.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_aborts_the_wait_and_leaves_no_key() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let holder = client(cfg.clone());
    let waiter = client(cfg.clone());
    let held = holder
        .acquire(vec!["res".into()], &opts(5_000), CancellationToken::new())
        .await
        .expect("acquired");

    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(ms(150)).await;
        trigger.cancel();
    });
    let mut o = opts(5_000);
    o.wait_timeout = Some(ms(10_000));
    o.retry_delay = Some(ms(40));
    let began = Instant::now();
    let err = waiter
        .acquire(vec!["res".into(), "free".into()], &o, cancel)
        .await
        .err()
        .expect("cancelled");
    let took = began.elapsed();
    assert_eq!(err.code, ErrorCode::Aborted, "{err}");
    assert!(took < ms(700), "aborted promptly, took {took:?}");
    assert!(err.attempts >= 1);
    assert_eq!(
        server.get(&key(&cfg, "res")).await.as_deref(),
        Some(held.token())
    );
    assert_eq!(server.get(&key(&cfg, "free")).await, None, "no key left");

    // Already cancelled: no attempt at all.
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = waiter
        .acquire(vec!["free".into()], &o, cancel)
        .await
        .err()
        .expect("cancelled before starting");
    assert_eq!(err.code, ErrorCode::Aborted);
    assert_eq!(err.attempts, 0);
    assert_eq!(server.get(&key(&cfg, "free")).await, None);
    holder.close().await;
    waiter.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_while_the_attempt_is_in_flight_undoes_it() {
    let (mut server, locks, k) = one_node("res");
    // Connect (and load the scripts) first, so the paused server only delays the attempt.
    let warm = locks
        .acquire(vec!["warm".into()], &opts(5_000), CancellationToken::new())
        .await
        .expect("acquired");
    assert!(warm.release().await.expect("released"));

    server.pause();
    let cancel = CancellationToken::new();
    let task = {
        let locks = locks.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            locks
                .acquire(vec!["res".into()], &opts(5_000), cancel)
                .await
        })
    };
    tokio::time::sleep(ms(100)).await;
    cancel.cancel();
    tokio::time::sleep(ms(200)).await;
    server.resume();
    // The SET lands once the server resumes, but the attempt was cancelled: the
    // token-checked undo follows it on the same connection.
    let err = within(ms(3_000), "cancelled acquire", task)
        .await
        .expect("acquire task")
        .err()
        .expect("cancelled while in flight");
    assert_eq!(err.code, ErrorCode::Aborted, "{err}");
    // The undo runs in the background (the abort does not wait for it).
    support::eventually(ms(3_000), "the late SET is undone", || async {
        server.get(&k).await.is_none()
    })
    .await;
    assert_eq!(locks.stats().held, 0);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_key_locks_are_all_or_nothing() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let (a, b, c) = (key(&cfg, "a"), key(&cfg, "b"), key(&cfg, "c"));
    let locks = client(cfg);
    server.set(&b, "foreign").await;

    let names: Vec<String> = vec!["a".into(), "b".into(), "c".into()];
    assert!(locks
        .try_acquire(names.clone(), &opts(5_000))
        .await
        .expect("answers")
        .is_none());
    assert_eq!(server.get(&a).await, None, "no partial lock on a");
    assert_eq!(server.get(&c).await, None, "no partial lock on c");
    assert_eq!(server.get(&b).await.as_deref(), Some("foreign"));

    server.del(&b).await;
    // Duplicates collapse into one key.
    let mut with_dup = names.clone();
    with_dup.push("a".into());
    let lock = locks
        .acquire(with_dup, &opts(600), CancellationToken::new())
        .await
        .expect("all free");
    assert_eq!(lock.names(), names.as_slice());
    for k in [&a, &b, &c] {
        assert_eq!(server.get(k).await.as_deref(), Some(lock.token()), "{k}");
        assert!(server.pttl(k).await > 0, "{k} has a ttl");
    }

    // Losing one key loses the lock, and the other keys are released.
    server.del(&b).await;
    within(ms(1_500), "loss of a multi-key lock", lock.ended()).await;
    assert_eq!(lock.status(), Status::Lost);
    support::eventually(ms(1_000), "a and c released after the loss", || async {
        server.get(&a).await.is_none() && server.get(&c).await.is_none()
    })
    .await;

    let lock = locks
        .acquire(names.clone(), &opts(5_000), CancellationToken::new())
        .await
        .expect("free again");
    assert!(lock.release().await.expect("released"));
    for k in [&a, &b, &c] {
        assert_eq!(server.get(k).await, None, "{k} released");
    }
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_releases_held_locks_and_refuses_new_ones() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let keys = [key(&cfg, "a"), key(&cfg, "b"), key(&cfg, "c")];
    let locks = client(cfg);
    let one = locks
        .acquire(vec!["a".into()], &opts(10_000), CancellationToken::new())
        .await
        .expect("acquired");
    let two = locks
        .acquire(
            vec!["b".into(), "c".into()],
            &opts(10_000),
            CancellationToken::new(),
        )
        .await
        .expect("acquired");
    for k in &keys {
        assert!(server.get(k).await.is_some());
    }

    within(ms(2_000), "close", locks.close()).await;
    for k in &keys {
        assert_eq!(server.get(k).await, None, "{k} released by close");
    }
    for lock in [&one, &two] {
        assert_eq!(lock.status(), Status::Released);
        within(ms(100), "ended() after close", lock.ended()).await;
        assert!(!lock.release().await.expect("no error"));
    }
    assert!(locks.is_closed());
    assert_eq!(locks.stats().held, 0);
    let err = locks
        .acquire(vec!["a".into()], &opts(1_000), CancellationToken::new())
        .await
        .err()
        .expect("closed");
    assert_eq!(err.code, ErrorCode::Closed);
    let err = locks
        .try_acquire(vec!["a".into()], &opts(1_000))
        .await
        .err()
        .expect("closed");
    assert_eq!(err.code, ErrorCode::Closed);
    let err = one.extend(ms(1_000)).await.expect_err("closed");
    assert_eq!(err.code, ErrorCode::Closed);
    locks.close().await; // a second close is a no-op
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_node_fails_fast_with_a_connection_error() {
    let mut server = RedisServer::start();
    let cfg = config(&[&server]);
    server.kill();
    let locks = client(cfg);
    let began = Instant::now();
    let mut once = opts(1_000);
    once.retry_count = Some(Some(0));
    let err = locks
        .acquire(vec!["res".into()], &once, CancellationToken::new())
        .await
        .err()
        .expect("nothing listens");
    assert!(began.elapsed() < ms(2_000), "took {:?}", began.elapsed());
    assert_eq!(err.code, ErrorCode::Connection, "{err}");
    assert!(err.message.contains(&server.name()), "{}", err.message);
    assert_eq!(err.nodes.len(), 1);
    assert!(err.nodes[0].answer.is_fault());
    assert!(locks.stats().errors >= 1);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_fails_before_any_io() {
    // Nothing listens on these URLs: validation must not need the network.
    let mut cfg = ClientConfig::default();
    cfg.nodes = vec![];
    assert_eq!(
        Client::new(cfg, None).err().map(|e| e.code),
        Some(ErrorCode::InvalidArgValue)
    );
    let mut cfg = ClientConfig::default();
    cfg.nodes = vec!["http://127.0.0.1:1".into()];
    assert_eq!(
        Client::new(cfg, None).err().map(|e| e.code),
        Some(ErrorCode::InvalidArgValue)
    );
    let mut cfg = ClientConfig::default();
    cfg.nodes = vec!["redis://127.0.0.1:1".into(), "redis://127.0.0.1:1/2".into()];
    assert_eq!(
        Client::new(cfg, None).err().map(|e| e.code),
        Some(ErrorCode::InvalidArgValue),
        "the same node twice is not Redlock"
    );
    let mut cfg = ClientConfig::default();
    cfg.nodes = vec!["redis://:secret@127.0.0.1:1".into()];
    cfg.drift_factor = 0.5;
    let err = Client::new(cfg, None).err().expect("drift factor too big");
    assert_eq!(err.code, ErrorCode::OutOfRange);

    let mut cfg = ClientConfig::default();
    cfg.nodes = vec!["redis://:secret@127.0.0.1:1".into()];
    let locks = Client::new(cfg, None).expect("valid config");
    assert_eq!(locks.node_names(), ["127.0.0.1:1".to_string()]);
    let err = locks
        .acquire(vec![], &opts(1_000), CancellationToken::new())
        .await
        .err()
        .expect("no keys");
    assert_eq!(err.code, ErrorCode::InvalidArgValue);
    let err = locks
        .acquire(vec![String::new()], &opts(1_000), CancellationToken::new())
        .await
        .err()
        .expect("empty key");
    assert_eq!(err.code, ErrorCode::InvalidArgValue);
    let mut o = opts(100);
    o.renew_interval = Some(ms(100));
    let err = locks
        .acquire(vec!["k".into()], &o, CancellationToken::new())
        .await
        .err()
        .expect("renew interval must be below ttl");
    assert_eq!(err.code, ErrorCode::OutOfRange);
    let mut o = opts(100);
    o.max_hold = Some(Some(Duration::ZERO));
    let err = locks
        .acquire(vec!["k".into()], &o, CancellationToken::new())
        .await
        .err()
        .expect("maxHold 0");
    assert_eq!(err.code, ErrorCode::OutOfRange);
    assert_eq!(locks.stats().errors, 0, "nothing was sent");
}

/// The event hook sees node errors; a hook needs no locking of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hook_reports_node_errors() {
    let mut server = RedisServer::start();
    let cfg = config(&[&server]);
    server.kill();
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = seen.clone();
    let hook: lockdog::core::EventHook = Arc::new(move |e: lockdog::core::Event<'_>| {
        if let lockdog::core::Event::NodeError { node, answer, .. } = e {
            if let Ok(mut v) = sink.lock() {
                v.push(format!("{node} {}", answer.kind()));
            }
        }
    });
    let locks = Client::new(cfg, Some(hook)).expect("valid config");
    let mut once = opts(1_000);
    once.retry_count = Some(Some(0));
    let _ = locks
        .acquire(vec!["res".into()], &once, CancellationToken::new())
        .await
        .err()
        .expect("nothing listens");
    let seen = seen.lock().expect("hook mutex").clone();
    assert_eq!(seen, [format!("{} unreachable", server.name())]);
    locks.close().await;
}
