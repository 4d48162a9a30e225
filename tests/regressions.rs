//! Regression tests for lease bookkeeping. The invariant: while `lock.is_held()`
//! is true, the lock's key still exists in Redis (on a quorum of nodes), i.e. the
//! local deadline never runs past the key's real expiry.

mod support;

use std::time::{Duration, Instant};

use lockdog::core::{Client, ClientConfig, ErrorCode};
use tokio_util::sync::CancellationToken;

use support::{config, ms, opts, RedisServer};

fn key(cfg: &ClientConfig, name: &str) -> String {
    format!("{}{name}", cfg.key_prefix)
}

/// `Lock::extend(ttl)` with `ttl <= drift` (e.g. 1 ms) would leave no validity:
/// it is refused before anything is sent, and the lock keeps its lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_to_a_tiny_ttl_is_refused_and_leaves_the_lease_alone() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let k = key(&cfg, "res");
    let locks = Client::new(cfg, None).expect("valid config");
    let lock = locks
        .acquire(vec!["res".into()], &opts(10_000), CancellationToken::new())
        .await
        .expect("acquired");
    let err = lock.extend(ms(1)).await.expect_err("refused");
    assert_eq!(err.code, ErrorCode::OutOfRange, "{err}");
    assert!(server.pttl(&k).await > 9_000, "no PEXPIRE was sent");
    assert!(lock.is_held());
    assert!(lock.remaining() > ms(9_000));
    locks.close().await;
}

/// A manual extend past maxHold, then a watchdog renewal clamped to maxHold:
/// the renewal shortens the key's TTL, and the local deadline with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_clamped_to_max_hold_shortens_the_local_deadline_too() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let k = key(&cfg, "res");
    let locks = Client::new(cfg, None).expect("valid config");
    let mut o = opts(300);
    o.max_hold = Some(Some(ms(1_000)));
    let lock = locks
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .expect("acquired");
    lock.extend(ms(1_200)).await.expect("extended");
    let began = Instant::now();
    while began.elapsed() < ms(1_500) {
        // Key first: if it is already gone, a later "held" is a lie.
        let gone = server.pttl(&k).await == -2;
        let held = lock.is_held();
        assert!(
            !(gone && held),
            "key expired but the lock is held for another {:?}",
            lock.remaining()
        );
        tokio::time::sleep(ms(20)).await;
    }
    locks.close().await;
}

/// Redlock: a renewal batch is waiting on a frozen node (its node timeout is
/// 5% of the old 10 s ttl) when `extend(1 s)` is called. The extend waits for
/// that batch, so its PEXPIRE 1000 lands after the batch's PEXPIRE 10000 and
/// the keys expire in 1 s: the local deadline must follow the extend, not the
/// batch's 10 s lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_settling_after_an_extend_does_not_restore_the_old_lease() {
    let mut servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let cfg = config(&[&servers[0], &servers[1], &servers[2]]);
    let k = key(&cfg, "res");
    let locks = Client::new(cfg, None).expect("valid config");
    let mut o = opts(10_000);
    o.renew_interval = Some(ms(200));
    let lock = locks
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .expect("acquired");
    servers[2].pause();
    // Within 200 ms a renewal batch is sent; it then waits up to 500 ms on node 3.
    tokio::time::sleep(ms(250)).await;
    let extended = Instant::now();
    let result = lock.extend(ms(1_000)).await;
    // Let the pending batch time out on node 3 and settle.
    tokio::time::sleep(ms(600)).await;
    servers[2].resume();
    assert!(result.is_ok(), "extend on 2 of 3 nodes");
    let pttl = servers[0].pttl(&k).await;
    assert!(pttl <= 1_000, "the extend was applied last: PTTL {pttl}");
    // Later renewals (now with the 1 s lease) may move the deadline on, but
    // never past the key's real expiry. The local deadline is read first (a
    // renewal landing between the reads only raises the PTTLs), and compared
    // with the longer of the two live nodes' PTTLs: a renewal counted by the
    // lock re-armed a quorum, so at least one of them.
    let remaining = lock.remaining();
    let read_at = Instant::now();
    let mut longest = -1;
    for s in &servers[..2] {
        longest = longest.max(s.pttl(&k).await);
    }
    // A PTTL read later is smaller by the time the reads took.
    let between = read_at.elapsed();
    assert!(
        remaining <= ms(longest.max(0) as u64 + 5) + between,
        "lease of 1 s extended {:?} ago: {remaining:?} remain locally, longest key PTTL {longest} ms",
        extended.elapsed()
    );
    locks.close().await;
}

/// A watchdog renewal (PEXPIRE with the old, short ttl) in flight while
/// `extend(long)` runs must not land after it and cut the new lease short.
/// SCRIPT FLUSH before each extend makes it reload the script and resend,
/// which widens the window a renewal could slip through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_in_flight_never_lands_after_an_extend() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let k = key(&cfg, "res");
    let locks = Client::new(cfg, None).expect("valid config");
    // A short lease renewed all the time (every 2 ms); short, yet long enough
    // that a loaded machine's scheduling delay cannot make it lapse.
    let mut o = opts(500);
    o.renew_interval = Some(ms(2));
    let lock = locks
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .expect("acquired");
    for round in 0..150 {
        lock.extend(ms(500)).await.expect("back to the short lease");
        tokio::time::sleep(ms(round % 3)).await;
        server
            .query::<String>(redis::cmd("SCRIPT").arg("FLUSH"))
            .await;
        lock.extend(ms(10_000)).await.expect("extended");
        let pttl = server.pttl(&k).await;
        assert!(
            pttl > 9_000,
            "round {round}: extend(10 s) answered, yet the key expires in {pttl} ms"
        );
    }
    assert!(lock.release().await.expect("released"));
    locks.close().await;
}

/// Leases are not timers: a ttl of `Number.MAX_SAFE_INTEGER` ms (2^53 − 1) is
/// sent to Redis as is, the watchdog does not overflow scheduling it, and an
/// extend to three times that works because Redis takes 64-bit PX values. An
/// extend past what Redis accepts fails with its error reply and leaves the
/// lease alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_of_max_safe_integer_ms_is_sent_whole_and_extends_as_redis_allows() {
    const MAX_SAFE: u64 = (1 << 53) - 1;
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let k = key(&cfg, "res");
    let locks = Client::new(cfg, None).expect("valid config");
    let lock = locks
        .acquire(
            vec!["res".into()],
            &opts(MAX_SAFE),
            CancellationToken::new(),
        )
        .await
        .expect("acquired with a 2^53 - 1 ms lease");
    let pttl = server.pttl(&k).await;
    assert!(
        pttl > (MAX_SAFE - 60_000) as i64 && pttl <= MAX_SAFE as i64,
        "PTTL {pttl}, expected about {MAX_SAFE}"
    );
    assert!(lock.is_held());
    // Validity: ttl less the 1% drift allowance, exact to the µs it is kept in.
    let remaining = lock.remaining().as_millis();
    let expected = u128::from(MAX_SAFE - MAX_SAFE / 100);
    assert!(
        remaining > expected - 60_000 && remaining <= expected,
        "remaining {remaining} ms, expected about {expected}"
    );

    lock.extend(ms(3 * MAX_SAFE)).await.expect("Redis takes it");
    let pttl = server.pttl(&k).await;
    assert!(pttl > (2 * MAX_SAFE) as i64, "PTTL {pttl} after extend");
    assert_eq!(lock.ttl(), ms(3 * MAX_SAFE));

    // i64::MAX ms from now overflows Redis's absolute expiry: it refuses.
    let err = lock
        .extend(ms(i64::MAX as u64))
        .await
        .expect_err("Redis rejects the expiry");
    assert_eq!(err.code, ErrorCode::Redis, "{err}");
    assert!(lock.is_held(), "a refused extend leaves the lock held");
    assert!(server.pttl(&k).await > (2 * MAX_SAFE) as i64);
    // Even a Duration no millisecond count can hold is refused, not a panic.
    let err = lock.extend(Duration::MAX).await.expect_err("refused");
    assert!(
        matches!(err.code, ErrorCode::Redis | ErrorCode::OutOfRange),
        "{err}"
    );
    assert!(lock.release().await.expect("released"));
    assert_eq!(server.pttl(&k).await, -2);
    locks.close().await;
}
