//! `waitReplicas`: one master with a replica; acquisitions and manual extensions
//! `WAIT` for the replica on connections of their own, best effort.

mod support;

use std::time::Duration;

use lockdog::core::{Client, ErrorCode};
use tokio_util::sync::CancellationToken;

use support::replicas::{linked, with_replica};
use support::{config, ms, opts, within, RedisServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquisition_and_an_extension_wait_for_the_replica() {
    let (master, replica) = with_replica();
    linked(&replica).await;
    let cfg = config(&[&master]);
    let key = format!("{}res", cfg.key_prefix);
    let locks = Client::new(cfg, None).expect("valid config");
    let mut o = opts(10_000);
    o.wait_replicas = Some(1);
    o.wait_replicas_timeout = Some(ms(2_000));
    let lock = locks
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .expect("acquired");
    assert_eq!(lock.replicas(), Some(1));
    // WAIT returned: the replica has applied the write already.
    assert_eq!(replica.get(&key).await.as_deref(), Some(lock.token()));
    lock.extend(ms(20_000)).await.expect("extended");
    assert_eq!(lock.replicas(), Some(1));
    let pttl: i64 = replica.query(redis::cmd("PTTL").arg(&key)).await;
    assert!(pttl > 15_000, "the replica has the extension: PTTL {pttl}");
    // Without the option, nothing is awaited and nothing is reported.
    let plain = locks
        .acquire(
            vec!["plain".into()],
            &opts(10_000),
            CancellationToken::new(),
        )
        .await
        .expect("acquired");
    assert_eq!(plain.replicas(), None);
    assert!(plain.release().await.expect("released"));
    assert!(lock.release().await.expect("released"));
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_replica_costs_the_wait_timeout_and_blocks_no_other_lock() {
    let (master, mut replica) = with_replica();
    linked(&replica).await;
    let cfg = config(&[&master]);
    let locks = Client::new(cfg, None).expect("valid config");
    replica.pause();
    let mut o = opts(10_000);
    o.wait_replicas = Some(1);
    o.wait_replicas_timeout = Some(ms(1_500));
    let l = locks.clone();
    let waiting = tokio::spawn(async move {
        l.acquire(vec!["slow".into()], &o, CancellationToken::new())
            .await
    });
    // Meanwhile, locks without the option go through the shared connection.
    for i in 0..20 {
        let other = within(
            ms(5_000),
            "an unrelated acquire",
            locks.acquire(
                vec![format!("fast:{i}")],
                &opts(10_000),
                CancellationToken::new(),
            ),
        )
        .await
        .expect("acquired");
        assert!(other.release().await.expect("released"));
    }
    assert!(!waiting.is_finished(), "the WAIT is still running");
    let lock = within(ms(10_000), "the WAIT to time out", waiting)
        .await
        .expect("task")
        .expect("granted anyway: best effort");
    assert_eq!(lock.replicas(), Some(0));
    assert!(lock.is_held());
    replica.resume();
    assert!(lock.release().await.expect("released"));
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_replicas_is_refused_where_it_cannot_apply() {
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let redlock =
        Client::new(config(&[&servers[0], &servers[1], &servers[2]]), None).expect("valid config");
    let mut o = opts(10_000);
    o.wait_replicas = Some(1);
    let err = redlock
        .acquire(vec!["k".into()], &o, CancellationToken::new())
        .await
        .err()
        .expect("refused");
    assert_eq!(err.code, ErrorCode::InvalidArgValue, "{err}");
    let single = Client::new(config(&[&servers[0]]), None).expect("valid config");
    let mut o = opts(1_000);
    o.wait_replicas = Some(1);
    o.wait_replicas_timeout = Some(Duration::from_millis(1_000));
    let err = single
        .acquire(vec!["k".into()], &o, CancellationToken::new())
        .await
        .err()
        .expect("refused");
    assert_eq!(err.code, ErrorCode::OutOfRange, "{err}");
    let mut cfg = config(&[&servers[0], &servers[1]]);
    cfg.defaults.wait_replicas = Some(2);
    assert!(
        Client::new(cfg, None).is_err(),
        "a client default is checked too"
    );
    redlock.close().await;
    single.close().await;
}
