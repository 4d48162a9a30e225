//! What the caller waits for is bounded by what it asked for: `connectTimeout`
//! for a node that accepts TCP and never answers, `waitTimeout` and a
//! cancellation while an attempt is in flight on a frozen (SIGSTOPped) node.
//! The cleanup release of a failed or cancelled attempt goes on in the
//! background: still sent (the key is gone once the node answers), and
//! awaited by `close()`.

mod support;

use std::time::{Duration, Instant};

use lockdog::core::{Client, ClientConfig, ErrorCode};
use tokio_util::sync::CancellationToken;

use support::silent::SilentListener;
use support::{config, eventually, ms, opts, within, RedisServer};

/// Scheduling slack on a loaded 2-core machine: generous, yet well below the
/// second timeout a foreground cleanup would add.
const SLACK: Duration = Duration::from_millis(450);

fn key(cfg: &ClientConfig, name: &str) -> String {
    format!("{}{name}", cfg.key_prefix)
}

/// A client already connected to `server` (so a pause only delays replies).
async fn warm(cfg: ClientConfig) -> Client {
    let locks = Client::new(cfg, None).expect("valid config");
    let lock = locks
        .acquire(vec!["warm".into()], &opts(5_000), CancellationToken::new())
        .await
        .expect("warm-up lock");
    assert!(lock.release().await.expect("warm-up release"));
    locks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_fails_acquire_within_the_connect_timeout() {
    let silent = SilentListener::start();
    let mut cfg = ClientConfig::default();
    cfg.nodes = vec![silent.url().into()];
    cfg.connect_timeout = ms(1_000);
    cfg.command_timeout = ms(1_000);
    let locks = Client::new(cfg, None).expect("valid config");
    let began = Instant::now();
    let mut once = opts(5_000);
    once.retry_count = Some(Some(0));
    let err = locks
        .acquire(vec!["res".into()], &once, CancellationToken::new())
        .await
        .err()
        .expect("no answer, no lock");
    let took = began.elapsed();
    eprintln!("silent node, connectTimeout 1000 ms: acquire failed after {took:?}");
    assert_eq!(err.code, ErrorCode::Connection, "{err}");
    assert!(
        took >= ms(950) && took < ms(1_000) + SLACK,
        "failed after {took:?} with connectTimeout 1000 ms: {err}"
    );
    // Waiting it out: each connect bounded by connectTimeout, the whole by waitTimeout.
    let mut waiting = opts(5_000);
    waiting.wait_timeout = Some(ms(2_500));
    let began = Instant::now();
    let err = locks
        .acquire(vec!["res".into()], &waiting, CancellationToken::new())
        .await
        .err()
        .expect("no answer, no lock");
    let took = began.elapsed();
    assert_eq!(err.code, ErrorCode::Connection, "{err}");
    assert!(err.attempts >= 2, "{} attempt(s)", err.attempts);
    assert!(
        took >= ms(2_450) && took < ms(2_500) + SLACK,
        "failed after {took:?} with waitTimeout 2500 ms: {err}"
    );
    within(ms(3_000), "close", locks.close()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_settles_promptly_while_the_node_is_frozen() {
    let mut server = RedisServer::start();
    let cfg = config(&[&server]);
    let k = key(&cfg, "res");
    let locks = warm(cfg).await;
    server.pause();
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let locks = locks.clone();
        let cancel = cancel.clone();
        async move {
            locks
                .acquire(vec!["res".into()], &opts(5_000), cancel)
                .await
        }
    });
    tokio::time::sleep(ms(100)).await;
    let cancelled_at = Instant::now();
    cancel.cancel();
    let settled = within(ms(5_000), "the aborted acquire", task).await;
    let took = cancelled_at.elapsed();
    server.resume();
    eprintln!("frozen node: acquire settled {took:?} after the abort");
    let err = settled.expect("acquire task").err().expect("aborted");
    assert_eq!(err.code, ErrorCode::Aborted, "{err}");
    assert!(took < SLACK, "settled {took:?} after the abort");
    // The SET lands once the node resumes; the undo sent behind it removes it.
    eventually(ms(3_000), "the late SET is undone", || async {
        server.get(&k).await.is_none()
    })
    .await;
    within(ms(3_000), "close", locks.close()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_timeout_bounds_an_attempt_on_a_frozen_node() {
    let mut server = RedisServer::start();
    let cfg = config(&[&server]);
    let k = key(&cfg, "res");
    let locks = warm(cfg).await;
    server.pause();
    let mut o = opts(5_000);
    o.wait_timeout = Some(ms(300));
    let began = Instant::now();
    let waited = locks
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await;
    let took = began.elapsed();
    let tried = locks.try_acquire(vec!["res".into()], &o).await;
    let took_try = began.elapsed() - took;
    server.resume();
    eprintln!("frozen node, waitTimeout 300 ms: acquire {took:?}, tryAcquire {took_try:?}");
    let err = waited.err().expect("no answer within the wait");
    assert_eq!(err.code, ErrorCode::Timeout, "{err}");
    assert!(
        took >= ms(290) && took < ms(300) + SLACK,
        "waitTimeout 300 ms settled after {took:?}"
    );
    let err = tried.err().expect("tryAcquire gets no answer either");
    assert_eq!(err.code, ErrorCode::Timeout, "{err}");
    assert!(
        took_try < ms(300) + SLACK,
        "tryAcquire with waitTimeout 300 ms settled after {took_try:?}"
    );
    eventually(ms(3_000), "the late SETs are undone", || async {
        server.get(&k).await.is_none()
    })
    .await;
    within(ms(3_000), "close", locks.close()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_an_abort_is_not_held_up_by_a_frozen_node() {
    let mut servers = support::redlock::three();
    let cfg = config(&[&servers[0], &servers[1], &servers[2]]);
    let locks = warm(cfg).await;
    let holder_cfg = locks.config().clone();
    let holder = Client::new(holder_cfg, None).expect("valid config");
    let _held = holder
        .acquire(vec!["res".into()], &opts(20_000), CancellationToken::new())
        .await
        .expect("held by another client");
    servers[2].pause();
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let locks = locks.clone();
        let cancel = cancel.clone();
        async move {
            let mut o = opts(20_000);
            o.retry_delay = Some(ms(10));
            o.retry_jitter = Some(ms(0));
            locks.acquire(vec!["res".into()], &o, cancel).await
        }
    });
    tokio::time::sleep(ms(100)).await;
    let cancelled_at = Instant::now();
    cancel.cancel();
    let settled = within(ms(5_000), "the aborted acquire", task).await;
    let took = cancelled_at.elapsed();
    servers[2].resume();
    eprintln!("Redlock, one node frozen: acquire settled {took:?} after the abort");
    let err = settled.expect("acquire task").err().expect("aborted");
    assert_eq!(err.code, ErrorCode::Aborted, "{err}");
    assert!(took < SLACK, "settled {took:?} after the abort");
    within(ms(5_000), "close", locks.close()).await;
    within(ms(5_000), "close", holder.close()).await;
}

/// The shared connection sets no response timeout of redis-rs's own (one
/// timer per command, ours): every call on a frozen node still ends within
/// `commandTimeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_on_a_frozen_node_ends_within_the_command_timeout() {
    let mut server = RedisServer::start();
    let mut cfg = config(&[&server]);
    cfg.command_timeout = ms(300);
    let locks = warm(cfg).await;
    let lock = locks
        .acquire(vec!["res".into()], &opts(10_000), CancellationToken::new())
        .await
        .expect("acquired");
    server.pause();
    let began = Instant::now();
    let inspected = locks.inspect("res").await;
    let inspect_took = began.elapsed();
    let began = Instant::now();
    let extended = lock.extend(ms(10_000)).await;
    let extend_took = began.elapsed();
    let began = Instant::now();
    let released = lock.release().await;
    let release_took = began.elapsed();
    server.resume();
    eprintln!(
        "frozen node, commandTimeout 300 ms: inspect {inspect_took:?}, extend {extend_took:?}, release {release_took:?}"
    );
    assert_eq!(inspected.err().map(|e| e.code), Some(ErrorCode::Connection));
    assert_eq!(extended.err().map(|e| e.code), Some(ErrorCode::Connection));
    assert_eq!(released.err().map(|e| e.code), Some(ErrorCode::Connection));
    for took in [inspect_took, extend_took, release_took] {
        assert!(
            took >= ms(290) && took < ms(300) + SLACK,
            "a call took {took:?}"
        );
    }
    within(ms(3_000), "close", locks.close()).await;
}
