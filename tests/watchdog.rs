//! The native watchdog against a real redis-server: renewal, loss detection,
//! maxHold, server pauses and restarts, NOSCRIPT recovery and batching.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use lockdog::core::engine::lock::Status;
use lockdog::core::{Client, ClientConfig, ErrorCode, Event, EventHook, NodeAnswer};
use tokio_util::sync::CancellationToken;

use support::{config, eventually, ms, opts, unrenewed, within, RedisServer};

fn key(cfg: &ClientConfig, name: &str) -> String {
    format!("{}{name}", cfg.key_prefix)
}

/// What the hook saw: `(lock id, error code, message)` per lost lock.
type LostEvents = Arc<Mutex<Vec<(u64, ErrorCode, String)>>>;

fn client_with_hook(cfg: ClientConfig) -> (Client, LostEvents) {
    let lost: LostEvents = Arc::default();
    let sink = lost.clone();
    let hook: EventHook = Arc::new(move |e: Event<'_>| {
        if let Event::Lost { id, error } = e {
            if let Ok(mut v) = sink.lock() {
                v.push((id, error.code, error.message.clone()));
            }
        }
    });
    let client = Client::new(cfg, Some(hook)).expect("valid client config");
    (client, lost)
}

fn lost_events(lost: &LostEvents) -> Vec<(u64, ErrorCode, String)> {
    lost.lock().expect("hook mutex").clone()
}

/// Waits for the hook's Lost events: `lock.ended()` resolves as the lock ends,
/// a moment before the core has emitted the event (see the report on ordering).
async fn wait_lost_events(lost: &LostEvents, count: usize) -> Vec<(u64, ErrorCode, String)> {
    eventually(ms(500), "the hook saw the Lost event", || async {
        lost_events(lost).len() >= count
    })
    .await;
    lost_events(lost)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_300ms_lock_alive_for_seconds() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let k = key(&cfg, "res");
    let (locks, lost) = client_with_hook(cfg);
    let lock = locks
        .acquire(vec!["res".into()], &opts(300), CancellationToken::new())
        .await
        .expect("acquired");
    let began = Instant::now();
    let mut con = server.con().await;
    // Holding past several TTLs is the point of this test: sample all along.
    while began.elapsed() < ms(1_600) {
        let value: Option<String> = redis::cmd("GET")
            .arg(&k)
            .query_async(&mut con)
            .await
            .expect("GET");
        assert_eq!(
            value.as_deref(),
            Some(lock.token()),
            "key held at {:?}",
            began.elapsed()
        );
        assert!(lock.is_held(), "held at {:?}", began.elapsed());
        tokio::time::sleep(ms(40)).await;
    }
    let pttl = server.pttl(&k).await;
    assert!(pttl > 0 && pttl <= 300, "renewed to the 300 ms ttl: {pttl}");
    let stats = locks.stats();
    // Every 100 ms for 1.6 s: about 16 renewals.
    assert!(stats.renewed >= 8, "renewed {} times", stats.renewed);
    assert_eq!(stats.lost, 0);
    assert!(lost_events(&lost).is_empty());
    assert!(lock.release().await.expect("released"));
    assert_eq!(server.get(&k).await, None);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_key_is_detected_as_lost_at_the_next_renewal() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let k = key(&cfg, "res");
    let (locks, lost) = client_with_hook(cfg);
    // A long ttl with frequent renewals: detection must come from the renewal,
    // long before the local validity (3 s) could run out.
    let mut o = opts(3_000);
    o.renew_interval = Some(ms(100));
    let lock = locks
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .expect("acquired");
    assert_eq!(server.del(&k).await, 1);
    let deleted = Instant::now();
    within(ms(100 + 400), "loss detection", lock.ended()).await;
    let after = deleted.elapsed();
    assert_eq!(lock.status(), Status::Lost);
    assert!(!lock.is_held());
    assert_eq!(lock.remaining(), Duration::ZERO);
    let loss = lock.loss().expect("a lost lock says why");
    assert_eq!(loss.code, ErrorCode::Lost);
    assert!(
        loss.message.contains("deleted"),
        "{} ({after:?})",
        loss.message
    );
    assert_eq!(loss.key.as_deref(), Some("res"));
    assert_eq!(loss.nodes.len(), 1);
    assert_eq!(loss.nodes[0].answer, NodeAnswer::NotHeld);

    let events = wait_lost_events(&lost, 1).await;
    assert_eq!(events.len(), 1, "exactly one Lost event: {events:?}");
    assert_eq!(events[0].0, lock.id());
    assert_eq!(events[0].1, ErrorCode::Lost);
    let stats = locks.stats();
    assert_eq!((stats.lost, stats.held), (1, 0));
    assert!(
        !lock.release().await.expect("no error"),
        "nothing to release"
    );
    assert_eq!(server.pttl(&k).await, -2, "nothing recreated");
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_hold_lets_the_lock_lapse() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let k = key(&cfg, "res");
    let (locks, lost) = client_with_hook(cfg);
    let mut o = opts(300);
    o.max_hold = Some(Some(ms(800)));
    let lock = locks
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .expect("acquired");
    let began = Instant::now();
    // Past its ttl, still renewed.
    tokio::time::sleep(ms(500)).await;
    assert!(lock.is_held(), "renewed until maxHold");
    assert_eq!(server.get(&k).await.as_deref(), Some(lock.token()));
    let pttl = server.pttl(&k).await;
    assert!(
        pttl > 0 && pttl <= 300,
        "renewals never reach past maxHold: PTTL {pttl} at 500 ms of 800"
    );

    within(ms(900), "lapse at maxHold", lock.ended()).await;
    let held_for = began.elapsed();
    assert!(
        held_for >= ms(700) && held_for < ms(1_100),
        "ended after {held_for:?} for maxHold 800 ms"
    );
    let loss = lock.loss().expect("lapsed");
    assert_eq!(loss.code, ErrorCode::Lost);
    assert!(loss.message.contains("maxHold"), "{}", loss.message);
    assert_eq!(wait_lost_events(&lost, 1).await.len(), 1);
    eventually(ms(500), "the key is gone once maxHold passed", || async {
        server.pttl(&k).await == -2
    })
    .await;
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_auto_renew_the_lock_lapses_at_its_validity() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let (locks, lost) = client_with_hook(cfg);
    let o = unrenewed(300);
    let lock = locks
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .expect("acquired");
    within(ms(600), "lapse at validity", lock.ended()).await;
    let loss = lock.loss().expect("lapsed");
    assert!(loss.message.contains("not renewed"), "{}", loss.message);
    assert_eq!(locks.stats().renewed, 0);
    assert_eq!(wait_lost_events(&lost, 1).await.len(), 1);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_server_ends_the_lock_when_its_validity_runs_out() {
    let mut server = RedisServer::start();
    let cfg = config(&[&server]);
    let (locks, lost) = client_with_hook(cfg);
    let lock = locks
        .acquire(vec!["res".into()], &opts(500), CancellationToken::new())
        .await
        .expect("acquired");
    server.pause();
    let paused = Instant::now();
    // A renewal cannot succeed; the local deadline (< 500 ms away) must end it,
    // even though the single node's command timeout (1 s) is longer.
    let outcome = tokio::time::timeout(ms(500 + 300), lock.ended()).await;
    let after = paused.elapsed();
    server.resume();
    assert!(outcome.is_ok(), "not ended {after:?} after the pause");
    assert!(after <= ms(520), "ended {after:?} after the pause");
    let loss = lock.loss().expect("lost");
    assert_eq!(loss.code, ErrorCode::Lost);
    assert!(
        loss.message.contains("validity ran out"),
        "{}",
        loss.message
    );
    assert_eq!(wait_lost_events(&lost, 1).await.len(), 1);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_loses_the_lock_and_serves_new_ones() {
    let mut server = RedisServer::start();
    let cfg = config(&[&server]);
    let k = key(&cfg, "res");
    let (locks, _lost) = client_with_hook(cfg);
    let mut o = opts(3_000);
    o.renew_interval = Some(ms(100));
    let lock = locks
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .expect("acquired");
    server.restart(); // no persistence: the key is gone, so is the script cache
    within(ms(2_000), "loss after restart", lock.ended()).await;
    let loss = lock.loss().expect("lost");
    assert!(loss.message.contains("deleted"), "{}", loss.message);

    // The client reconnects and reloads its scripts.
    let mut retry = opts(3_000);
    retry.wait_timeout = Some(ms(2_000));
    let again = within(
        ms(3_000),
        "acquire after restart",
        locks.acquire(vec!["res".into()], &retry, CancellationToken::new()),
    )
    .await
    .expect("acquired after restart");
    assert_eq!(server.get(&k).await.as_deref(), Some(again.token()));
    assert!(again.release().await.expect("released"));
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_recover_from_noscript_after_script_flush() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let k = key(&cfg, "res");
    let (locks, lost) = client_with_hook(cfg);
    let lock = locks
        .acquire(vec!["res".into()], &opts(600), CancellationToken::new())
        .await
        .expect("acquired");
    // Let one renewal load the extend script, then flush the cache.
    eventually(ms(1_000), "a first renewal", || async {
        locks.stats().renewed >= 1
    })
    .await;
    server.query::<()>(redis::cmd("SCRIPT").arg("FLUSH")).await;
    let renewed = locks.stats().renewed;
    // Holding past the ttl is the test.
    tokio::time::sleep(ms(1_200)).await;
    assert!(lock.is_held(), "still held after SCRIPT FLUSH");
    assert_eq!(server.get(&k).await.as_deref(), Some(lock.token()));
    assert!(
        locks.stats().renewed >= renewed + 3,
        "renewals went on: {} -> {}",
        renewed,
        locks.stats().renewed
    );
    assert!(
        server.error_count("NOSCRIPT").await >= 1,
        "a renewal did hit NOSCRIPT"
    );
    assert!(lost_events(&lost).is_empty());
    assert_eq!(locks.stats().lost, 0);
    assert!(lock.release().await.expect("released"));
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_handle_stops_renewal() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let k = key(&cfg, "res");
    let (locks, lost) = client_with_hook(cfg);
    let lock = locks
        .acquire(vec!["res".into()], &opts(600), CancellationToken::new())
        .await
        .expect("acquired");
    let copy = lock.clone();
    drop(lock);
    tokio::time::sleep(ms(700)).await;
    assert!(copy.is_held(), "a clone keeps the lock renewed");
    drop(copy);
    assert_eq!(locks.stats().held, 0);
    eventually(
        ms(600),
        "the unreferenced lock expires by its ttl",
        || async { server.pttl(&k).await == -2 },
    )
    .await;
    assert!(lost_events(&lost).is_empty(), "dropping is not a loss");
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_locks_are_renewed_in_batches() {
    const LOCKS: usize = 1_500;
    const TTL_MS: u64 = 600;
    const HOLD: Duration = Duration::from_millis(2_000);
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let keys: Vec<String> = (0..LOCKS).map(|i| key(&cfg, &format!("k{i}"))).collect();
    let (locks, lost) = client_with_hook(cfg);
    let acquired = join_all((0..LOCKS).map(|i| {
        let locks = locks.clone();
        async move {
            locks
                .acquire(
                    vec![format!("k{i}")],
                    &opts(TTL_MS),
                    CancellationToken::new(),
                )
                .await
        }
    }))
    .await;
    let held: Vec<_> = acquired
        .into_iter()
        .map(|r| r.map_err(|e| e.to_string()).expect("every lock acquired"))
        .collect();

    let reads = |s: Option<String>| s.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let calls_before = server.evalsha_calls().await;
    let reads_before = reads(server.info_field("stats", "total_reads_processed").await);
    let cpu_before = server.cpu_seconds().await;
    let renewed_before = locks.stats().renewed;
    // Holding is the test: ~10 renewal rounds of every lock.
    tokio::time::sleep(HOLD).await;
    let calls = server.evalsha_calls().await - calls_before;
    let socket_reads =
        reads(server.info_field("stats", "total_reads_processed").await) - reads_before;
    let cpu = server.cpu_seconds().await - cpu_before;
    let renewed = locks.stats().renewed - renewed_before;
    eprintln!(
        "{LOCKS} locks over {HOLD:?}: {calls} EVALSHA, {renewed} renewals, {socket_reads} socket reads, \
         Redis CPU {:.1} µs per renewal",
        cpu * 1e6 / renewed.max(1) as f64
    );

    let lost_now = lost_events(&lost);
    assert!(
        lost_now.is_empty(),
        "{} of {LOCKS} lost, e.g. {:?}",
        lost_now.len(),
        lost_now.first()
    );
    assert_eq!(locks.stats().lost, 0);
    assert!(held.iter().all(|l| l.is_held()));
    let mut con = server.con().await;
    let values: Vec<Option<String>> = redis::cmd("MGET")
        .arg(&keys)
        .query_async(&mut con)
        .await
        .expect("MGET");
    for (lock, value) in held.iter().zip(&values) {
        assert_eq!(value.as_deref(), Some(lock.token()));
    }

    // Each lock renews every ttl/3 = 200 ms after its last renewal finished (a
    // little earlier when riding along with a batch): about locks × hold /
    // interval renewals ("none lost" above is the lower bound that matters).
    let expected = (LOCKS as u64) * (HOLD.as_millis() as u64) / (TTL_MS / 3);
    assert!(
        renewed >= expected / 2 && renewed <= expected * 3 / 2,
        "{renewed} renewals, ~{expected} expected"
    );
    // One script per node per tick carries every due lock (at most 1,000 keys
    // a call, so two calls a tick here): dozens of calls, not thousands, and
    // they arrive in a few dozen socket reads.
    let ticks = HOLD.as_millis() as u64 / (TTL_MS / 3);
    assert!(
        calls <= ticks * 2 * 4,
        "{calls} EVALSHA calls for {renewed} renewals in ~{ticks} ticks: not one script per tick"
    );
    assert!(
        socket_reads * 10 < renewed,
        "{socket_reads} socket reads for {renewed} renewals: not batched"
    );

    let released = join_all(held.iter().map(|l| l.release())).await;
    assert!(released.into_iter().all(|r| matches!(r, Ok(true))));
    let values: Vec<Option<String>> = redis::cmd("MGET")
        .arg(&keys)
        .query_async(&mut con)
        .await
        .expect("MGET");
    assert!(values.iter().all(Option::is_none), "all released");
    locks.close().await;
}

/// One renewal script carries many locks, yet settles each on its own: a lock
/// whose key was deleted and one whose key now holds another owner's token are
/// lost (and neither key is touched), while every other lock in the same
/// batch is renewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_renewal_detects_each_lost_lock_on_its_own() {
    const LOCKS: usize = 40;
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let (locks, lost) = client_with_hook(cfg.clone());
    let held: Vec<_> = join_all((0..LOCKS).map(|i| {
        let locks = locks.clone();
        async move {
            // Two keys each: a lock is renewed only when both still hold its token.
            let names = vec![format!("b{i}:x"), format!("b{i}:y")];
            locks
                .acquire(names, &opts(600), CancellationToken::new())
                .await
                .expect("acquired")
        }
    }))
    .await;
    let calls_before = server.evalsha_calls().await;
    server.del(&key(&cfg, "b7:y")).await;
    server.set(&key(&cfg, "b9:x"), "someone-else").await;
    eventually(ms(2_000), "both losses reported", || async {
        lost_events(&lost).len() == 2
    })
    .await;
    // Two more rounds for the others.
    tokio::time::sleep(ms(500)).await;
    let lost_ids: Vec<u64> = lost_events(&lost).iter().map(|(id, _, _)| *id).collect();
    for (i, lock) in held.iter().enumerate() {
        let expect_lost = i == 7 || i == 9;
        assert_eq!(!lock.is_held(), expect_lost, "lock {i}");
        assert_eq!(lost_ids.contains(&lock.id()), expect_lost, "lock {i}");
    }
    assert_eq!(
        server.get(&key(&cfg, "b9:x")).await.as_deref(),
        Some("someone-else"),
        "a foreign value is left alone"
    );
    assert_eq!(
        server.get(&key(&cfg, "b7:y")).await,
        None,
        "never recreated"
    );
    assert!(server.pttl(&key(&cfg, "b3:y")).await > 0);
    let calls = server.evalsha_calls().await - calls_before;
    assert!(
        calls < 20,
        "{calls} EVALSHA calls: the {LOCKS} locks share one script per round"
    );
    locks.close().await;
}
