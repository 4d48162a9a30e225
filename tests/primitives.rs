//! Adopting a lock by its token, semaphores, read-write locks and fair locks
//! against real redis-servers, through the napi-free core.

mod support;

use lockdog::core::engine::lock::Status;
use lockdog::core::{AcquireOptions, Client, ClientConfig, ErrorCode};
use tokio_util::sync::CancellationToken;

use support::{config, eventually, ms, opts, unrenewed, waiting, RedisServer};

fn client(cfg: ClientConfig) -> Client {
    Client::new(cfg, None).expect("valid client config")
}

fn once(ttl_ms: u64) -> AcquireOptions {
    let mut o = opts(ttl_ms);
    o.retry_count = Some(Some(0));
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_lock_is_renewed_by_its_new_owner_and_a_foreign_token_is_refused() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let k = format!("{}job", cfg.key_prefix);
    let first = client(cfg.clone());
    let second = client(cfg);
    let o = unrenewed(800);
    let lock = first
        .acquire(vec!["job".into()], &o, CancellationToken::new())
        .await
        .expect("acquired");
    let token = lock.token().to_string();
    // The first owner lets go without releasing (as a process that exits):
    // a lock nobody holds is neither renewed nor cleaned up.
    drop(lock);

    let foreign = second
        .adopt(vec!["job".into()], "not-the-token".into(), &opts(800))
        .await
        .err()
        .expect("a foreign token is refused");
    assert_eq!(foreign.code, ErrorCode::Lost);
    let missing = second
        .adopt(vec!["none".into()], token.clone(), &opts(800))
        .await
        .err()
        .expect("a missing key is refused");
    assert_eq!(missing.code, ErrorCode::Lost);

    let adopted = second
        .adopt(vec!["job".into()], token.clone(), &opts(600))
        .await
        .expect("adopted by its token");
    assert_eq!(adopted.token(), token);
    // Past the first owner's lease and several of the new one's.
    tokio::time::sleep(ms(1_500)).await;
    assert_eq!(server.get(&k).await.as_deref(), Some(token.as_str()));
    assert_eq!(adopted.status(), Status::Held);
    assert!(adopted.release().await.expect("released"));
    assert_eq!(server.get(&k).await, None);
    first.close().await;
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_admits_limit_permits_all_or_nothing_and_counts_them() {
    let server = RedisServer::start();
    let locks = client(config(&[&server]));
    let take = |permits: u32, o: AcquireOptions| {
        let locks = locks.clone();
        async move {
            let request = locks
                .prepare_permits("pool".into(), 3, permits, &o)
                .expect("valid request");
            locks
                .acquire_prepared(request, CancellationToken::new())
                .await
        }
    };
    let two = take(2, once(5_000)).await.expect("two of three");
    let refused = take(2, once(5_000))
        .await
        .err()
        .expect("two more do not fit");
    assert_eq!(refused.code, ErrorCode::Taken);
    let one = take(1, once(5_000)).await.expect("the third permit");
    let count = locks.count_permits("pool").await.expect("counted");
    assert_eq!((count.permits, count.holders), (3, 2));
    assert!(two.release().await.expect("released"));
    let again = take(2, once(5_000)).await.expect("freed permits are taken");
    assert!(one.release().await.expect("released"));
    assert!(again.release().await.expect("released"));
    assert_eq!(
        locks.count_permits("pool").await.expect("counted").permits,
        0
    );
    for (limit, permits) in [(0, 1), (2, 3), (2, 0)] {
        let err = locks
            .prepare_permits("pool".into(), limit, permits, &opts(1_000))
            .err()
            .expect("refused");
        assert_eq!(
            err.code,
            ErrorCode::OutOfRange,
            "limit {limit}, permits {permits}"
        );
    }
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_lease_ended_is_reclaimed_and_the_watchdog_keeps_the_living() {
    let server = RedisServer::start();
    let cfg = config(&[&server]);
    let k = format!("{}slots", cfg.key_prefix);
    let locks = client(cfg);
    let take = |o: AcquireOptions| {
        let locks = locks.clone();
        async move {
            let request = locks
                .prepare_permits("slots".into(), 1, 1, &o)
                .expect("valid request");
            locks
                .acquire_prepared(request, CancellationToken::new())
                .await
        }
    };
    let mut lapsing = once(400);
    lapsing.auto_renew = Some(false);
    let lapsed = take(lapsing).await.expect("taken");
    let renewed_alone = take(once(400)).await.err().expect("full");
    assert_eq!(renewed_alone.code, ErrorCode::Taken);
    // Its lease ends: the next acquisition removes it.
    let mut waiting = opts(400);
    waiting.wait_timeout = Some(ms(3_000));
    let next = take(waiting).await.expect("the lapsed permit is reclaimed");
    let members: Vec<String> = server
        .query(redis::cmd("ZRANGE").arg(&k).arg(0).arg(-1))
        .await;
    assert_eq!(members, vec![next.token().to_string()]);
    eventually(ms(2_000), "the lapsed holder is told", || async {
        lapsed.status() == Status::Lost
    })
    .await;
    tokio::time::sleep(ms(1_000)).await;
    assert_eq!(next.status(), Status::Held, "renewed past its 400 ms lease");
    assert!(next.release().await.expect("released"));
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_a_writer_is_alone_and_fair_locks_refuse_redlock() {
    let server = RedisServer::start();
    let locks = client(config(&[&server]));
    let rw = |write: bool| {
        let locks = locks.clone();
        async move {
            let request = locks
                .prepare_rw("doc".into(), write, &once(5_000))
                .expect("valid request");
            locks
                .acquire_prepared(request, CancellationToken::new())
                .await
        }
    };
    let r1 = rw(false).await.expect("reader");
    let r2 = rw(false).await.expect("second reader");
    assert_eq!(
        rw(true).await.err().expect("no writer").code,
        ErrorCode::Taken
    );
    assert!(r1.release().await.expect("released"));
    assert!(r2.release().await.expect("released"));
    let w = rw(true).await.expect("writer");
    assert_eq!(
        rw(false).await.err().expect("no reader").code,
        ErrorCode::Taken
    );
    assert!(w.release().await.expect("released"));
    locks.close().await;

    let others = [RedisServer::start(), RedisServer::start()];
    let redlock = client(config(&[&server, &others[0], &others[1]]));
    let err = redlock
        .prepare_fair("k".into(), &opts(1_000))
        .err()
        .expect("fair is refused with several nodes");
    assert_eq!(err.code, ErrorCode::InvalidArgValue);
    for err in [
        redlock
            .prepare_fair_permits("k".into(), 1, 1, &opts(1_000))
            .err(),
        redlock
            .prepare_fair_rw("k".into(), true, &opts(1_000))
            .err(),
    ] {
        assert_eq!(err.expect("refused").code, ErrorCode::InvalidArgValue);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_fair_attempt_takes_permits_only_when_they_fit() {
    let server = RedisServer::start();
    let locks = client(config(&[&server]));
    let sem = |permits: u32, fair: bool| {
        let locks = locks.clone();
        async move {
            let request = if fair {
                locks.prepare_fair_permits("s".into(), 3, permits, &once(5_000))
            } else {
                locks.prepare_permits("s".into(), 3, permits, &once(5_000))
            }
            .expect("valid request");
            locks
                .acquire_prepared(request, CancellationToken::new())
                .await
        }
    };
    let held = sem(2, false).await.expect("two permits");
    // One permit is free, and a single fair attempt takes it when nobody waits.
    let one = sem(1, true).await.expect("a free permit");
    assert!(one.release().await.expect("released"));
    assert_eq!(
        sem(2, true).await.err().expect("too few free").code,
        ErrorCode::Taken
    );
    assert!(held.release().await.expect("released"));
    locks.close().await;
}

/// The slots a Redlock holder's member names: "2:0-1.5:<uuid>" → [0, 1, 5].
fn slots_of(member: &str) -> Vec<u32> {
    let runs = member.split(':').nth(1).expect("a member naming its slots");
    let mut out = Vec::new();
    for run in runs.split('.') {
        let (a, b) = run.split_once('-').unwrap_or((run, run));
        let (a, b): (u32, u32) = (a.parse().expect("slot"), b.parse().expect("slot"));
        out.extend(a..=b);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_on_three_nodes_takes_distinct_slots_and_a_node_down_votes_against() {
    let mut servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let mut cfg = config(&[&servers[0], &servers[1], &servers[2]]);
    cfg.command_timeout = ms(300);
    let k = format!("{}pool", cfg.key_prefix);
    let locks = client(cfg);
    let take = |permits: u32, o: AcquireOptions| {
        let locks = locks.clone();
        async move {
            let request = locks
                .prepare_permits("pool".into(), 3, permits, &o)
                .expect("valid request");
            locks
                .acquire_prepared(request, CancellationToken::new())
                .await
        }
    };
    let two = take(2, once(5_000)).await.expect("two of three");
    let one = take(1, once(5_000)).await.expect("the third permit");
    let mut slots = [slots_of(two.token()), slots_of(one.token())].concat();
    slots.sort_unstable();
    assert_eq!(slots, [0, 1, 2], "three distinct slots");
    assert_eq!(
        take(1, once(5_000)).await.err().expect("full").code,
        ErrorCode::Taken
    );
    for s in &servers {
        let members: Vec<String> = s.query(redis::cmd("ZRANGE").arg(&k).arg(0).arg(-1)).await;
        assert_eq!(members.len(), 2, "every node records both holders");
    }
    let count = locks.count_permits("pool").await.expect("counted");
    assert_eq!((count.permits, count.holders), (3, 2));
    // One node down: it votes against, the other two still grant and renew.
    servers[2].kill();
    assert!(two.release().await.expect("released on a quorum"));
    let again = take(2, once(5_000))
        .await
        .expect("two nodes of three grant");
    tokio::time::sleep(ms(300)).await;
    assert_eq!(again.status(), Status::Held);
    let count = locks.count_permits("pool").await.expect("counted");
    assert_eq!((count.permits, count.holders), (3, 2));
    // Two down: no quorum, for acquiring as for counting.
    assert!(one.release().await.expect("released on a quorum"));
    servers[1].kill();
    let err = take(1, once(2_000)).await.err().expect("no quorum");
    assert_ne!(err.code, ErrorCode::Taken);
    assert!(locks.count_permits("pool").await.is_err());
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_holders_on_three_nodes_never_exceed_the_limit() {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let cfg = config(&[&servers[0], &servers[1], &servers[2]]);
    let clients: Vec<Client> = (0..3).map(|_| client(cfg.clone())).collect();
    let held = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let taken = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for (i, locks) in clients.iter().cycle().take(9).enumerate() {
        let (locks, held, most, taken) = (locks.clone(), held.clone(), most.clone(), taken.clone());
        tasks.push(tokio::spawn(async move {
            let until = std::time::Instant::now() + ms(1_500);
            while std::time::Instant::now() < until {
                let permits = 1 + (i as u32 + taken.load(Ordering::Relaxed)) % 2;
                let o = waiting(2_000, 5_000, 10, 10);
                let request = locks
                    .prepare_permits("pool".into(), 3, permits, &o)
                    .expect("valid request");
                let lock = locks
                    .acquire_prepared(request, CancellationToken::new())
                    .await
                    .expect("a permit within the wait");
                let now = held.fetch_add(permits, Ordering::SeqCst) + permits;
                most.fetch_max(now, Ordering::SeqCst);
                taken.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(ms(3)).await;
                held.fetch_sub(permits, Ordering::SeqCst);
                lock.release().await.expect("released");
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    assert_eq!(
        most.load(Ordering::SeqCst),
        3,
        "held side by side up to the limit, never more"
    );
    assert!(taken.load(Ordering::Relaxed) > 20);
    for c in clients {
        c.close().await;
    }
}
