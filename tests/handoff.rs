//! Waiting without polling: a release notice (pub/sub) wakes the first waiter
//! of a key, waiters are served in arrival order, and the retry timer still
//! covers whatever a notice cannot (a crashed holder, a dropped connection).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use lockdog::core::{AcquireOptions, Client, ErrorCode, Lock, LockError};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use support::{config, eventually, ms, opts, within, RedisServer};

/// Waits for a held lock with a retry timer far longer than the test: only a
/// release notice can end the wait in time.
fn patient(ttl_ms: u64) -> AcquireOptions {
    let mut o = opts(ttl_ms);
    o.retry_delay = Some(ms(20_000));
    o.retry_jitter = Some(ms(0));
    o.wait_timeout = Some(ms(30_000));
    o
}

/// Two clients on `servers`: the first already holds `key` (ttl `ttl_ms`), the
/// second is for the waiters.
async fn held_by_another(
    servers: &[&RedisServer],
    key: &str,
    ttl_ms: u64,
) -> (Client, Client, Lock) {
    let cfg = config(servers);
    let holder = Client::new(cfg.clone(), None).expect("valid config");
    let waiters = Client::new(cfg, None).expect("valid config");
    let held = holder
        .acquire(vec![key.into()], &opts(ttl_ms), CancellationToken::new())
        .await
        .expect("acquired");
    (holder, waiters, held)
}

/// A patient waiter for `key`, returned once it waits in line: the client
/// then has `queued` waiters for the key (the first found it held; later
/// callers of the client queue behind it without an attempt).
async fn waiter(
    client: &Client,
    key: &str,
    queued: u64,
    cancel: CancellationToken,
) -> JoinHandle<Result<Lock, LockError>> {
    let (c, k) = (client.clone(), key.to_string());
    let task = tokio::spawn(async move { c.acquire(vec![k], &patient(20_000), cancel).await });
    until_queued(client, key, queued).await;
    task
}

async fn until_queued(client: &Client, key: &str, queued: u64) {
    eventually(ms(5_000), "the waiter to queue up", || async {
        client.waiting(key) as u64 == queued
    })
    .await;
}

/// How many `__lockdog:*` channels have subscribers on `server`.
async fn channels(server: &RedisServer) -> usize {
    let channels: Vec<String> = server
        .query(redis::cmd("PUBSUB").arg("CHANNELS").arg("__lockdog:*"))
        .await;
    channels.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_the_waiter_at_once_instead_of_its_retry_timer() {
    let server = RedisServer::start();
    let (holder, waiters, held) = held_by_another(&[&server], "a", 10_000).await;
    let waiting = waiter(&waiters, "a", 1, CancellationToken::new()).await;
    // Its subscription is in place once the server lists the channel.
    eventually(ms(5_000), "the waiter subscribed", || async {
        channels(&server).await == 1
    })
    .await;
    assert!(held.release().await.expect("released"));
    let lock = within(ms(10_000), "the waiter to be woken", waiting)
        .await
        .expect("task")
        .expect("acquired after the release");
    assert_eq!(
        lock.attempts(),
        2,
        "one failed attempt, one after the notice"
    );
    assert_eq!(waiters.stats().woken, 1);
    assert!(lock.release().await.expect("released"));
    // Nobody waits any more: the subscription ends.
    eventually(ms(5_000), "the subscription to end", || async {
        channels(&server).await == 0
    })
    .await;
    holder.close().await;
    waiters.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_arrival_order_one_wake_up_per_release() {
    let server = RedisServer::start();
    let (holder, waiters, first) = held_by_another(&[&server], "q", 10_000).await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..5u64 {
        let w = waiters.clone();
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let lock = w
                .acquire(vec!["q".into()], &patient(10_000), CancellationToken::new())
                .await
                .expect("acquired in turn");
            order.lock().expect("order").push(i);
            // Each holder hands on to the next by releasing.
            assert!(lock.release().await.expect("released"));
        }));
        // Arrival order: the next waiter starts once this one has queued up.
        until_queued(&waiters, "q", i + 1).await;
    }
    let began = Instant::now();
    assert!(first.release().await.expect("released"));
    for t in tasks {
        within(ms(10_000), "every waiter in turn", t)
            .await
            .expect("waiter");
    }
    assert_eq!(*order.lock().expect("order"), vec![0, 1, 2, 3, 4]);
    let s = waiters.stats();
    assert_eq!(s.woken, 5, "five releases, five wake-ups");
    assert_eq!(
        s.contended, 1,
        "only the first waiter tried before a notice; the others queued behind it, and none tried again without a notice"
    );
    assert!(began.elapsed() < ms(20_000));
    holder.close().await;
    waiters.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_each_node_announces_the_release_and_the_waiters_go_in_turn() {
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let (holder, waiters, held) =
        held_by_another(&[&servers[0], &servers[1], &servers[2]], "r", 10_000).await;
    let mut tasks = Vec::new();
    for i in 0..2u64 {
        tasks.push(waiter(&waiters, "r", i + 1, CancellationToken::new()).await);
    }
    for s in &servers {
        eventually(ms(5_000), "every node has the subscription", || async {
            channels(s).await == 1
        })
        .await;
    }
    assert!(held.release().await.expect("released"));
    let second = tasks.pop().expect("task");
    let first = within(ms(10_000), "the first waiter", tasks.pop().expect("task"))
        .await
        .expect("task")
        .expect("acquired");
    // The first waiter may have been woken more than once (its own undo of a
    // partial attempt is announced too), but the timers never fired.
    let woken_first = waiters.stats().woken;
    assert!(woken_first >= 1);
    assert!(!second.is_finished());
    assert!(first.release().await.expect("released"));
    let second = within(ms(10_000), "the second waiter", second)
        .await
        .expect("task")
        .expect("acquired");
    assert!(waiters.stats().woken > woken_first);
    assert!(
        second.attempts() <= 4,
        "the second waiter tried {} times: it was woken by others' notices",
        second.attempts()
    );
    assert!(second.release().await.expect("released"));
    holder.close().await;
    waiters.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_notice_connection_comes_back_subscribed() {
    let server = RedisServer::start();
    let (holder, waiters, held) = held_by_another(&[&server], "k", 10_000).await;
    let waiting = waiter(&waiters, "k", 1, CancellationToken::new()).await;
    let channel = format!("__lockdog:released:{}k", waiters.config().key_prefix);
    let subscribers = || async {
        let reply: Vec<redis::Value> = server
            .query(redis::cmd("PUBSUB").arg("NUMSUB").arg(&channel))
            .await;
        match reply.get(1) {
            Some(redis::Value::Int(n)) => *n,
            _ => -1,
        }
    };
    eventually(ms(5_000), "the waiter subscribed", || async {
        subscribers().await == 1
    })
    .await;
    let killed: i64 = server
        .query(redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub"))
        .await;
    assert_eq!(killed, 1);
    eventually(ms(5_000), "the subscription to come back", || async {
        subscribers().await == 1
    })
    .await;
    assert!(held.release().await.expect("released"));
    let lock = within(ms(10_000), "the waiter to be woken", waiting)
        .await
        .expect("task")
        .expect("acquired");
    assert_eq!(waiters.stats().woken, 1);
    assert!(lock.release().await.expect("released"));
    holder.close().await;
    waiters.close().await;
}

/// A holder that dies releases nothing: the waiter retries right after the
/// holder's TTL, however long its retry delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_holder_is_taken_over_when_its_key_expires() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let waiter = Client::new(cfg.clone(), None).expect("valid config");
    // What a crashed process leaves behind: a key nobody will release.
    let stored = format!("{}c", cfg.key_prefix);
    let _: String = server
        .query(
            redis::cmd("SET")
                .arg(&stored)
                .arg("dead-holder")
                .arg("PX")
                .arg(400),
        )
        .await;
    let lock = within(
        ms(10_000),
        "the take-over",
        waiter.acquire(vec!["c".into()], &patient(10_000), CancellationToken::new()),
    )
    .await
    .expect("acquired after the holder's TTL");
    assert_eq!(lock.attempts(), 2);
    assert_eq!(waiter.stats().woken, 0, "nobody announced anything");
    waiter.close().await;
}

/// Subscribing to a node that does not answer must not hold up an abort.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_is_not_held_up_by_a_subscription_to_a_stalled_node() {
    let mut servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let (holder, waiters, held) =
        held_by_another(&[&servers[0], &servers[1], &servers[2]], "s", 20_000).await;
    servers[2].pause();
    let cancel = CancellationToken::new();
    let waiting = waiter(&waiters, "s", 1, cancel.clone()).await;
    cancel.cancel();
    let err = within(ms(1_000), "the abort", waiting)
        .await
        .expect("task")
        .err()
        .expect("aborted");
    assert_eq!(err.code, ErrorCode::Aborted, "{err}");
    servers[2].resume();
    assert!(held.release().await.expect("released"));
    holder.close().await;
    waiters.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_notices_heard_a_waiter_sleeps_until_the_lease_ends_not_its_retry_delay() {
    let server = RedisServer::start();
    let (holder, waiters, held) = held_by_another(&[&server], "eager", 10_000).await;
    // An eager retry timer: without notices this waiter would poll every 10 ms.
    let mut eager = opts(10_000);
    eager.retry_delay = Some(ms(10));
    eager.retry_jitter = Some(ms(0));
    eager.wait_timeout = Some(ms(30_000));
    let c = waiters.clone();
    let waiting = tokio::spawn(async move {
        c.acquire(vec!["eager".into()], &eager, CancellationToken::new())
            .await
    });
    eventually(ms(5_000), "the waiter subscribed", || async {
        channels(&server).await == 1
    })
    .await;
    // Held for a while: with its release heard, the waiter stops polling.
    tokio::time::sleep(ms(600)).await;
    let polled = waiters.stats().contended;
    assert!(
        polled <= 3,
        "attempts while the holder kept the lock: {polled} (60 if it polled every 10 ms)"
    );
    let began = Instant::now();
    assert!(held.release().await.expect("released"));
    let lock = within(ms(2_000), "the waiter", waiting)
        .await
        .expect("task")
        .expect("acquired once released");
    assert!(began.elapsed() < ms(1_000), "woken by the release notice");
    assert!(lock.release().await.expect("released"));
    holder.close().await;
    waiters.close().await;
}
