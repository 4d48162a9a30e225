//! A master named by Redis Sentinel: locks are taken there and, after
//! `SENTINEL FAILOVER`, renewed on the promoted replica.

mod support;

use lockdog::core::config::SentinelConfig;
use lockdog::core::Client;
use tokio_util::sync::CancellationToken;

use support::sentinel::{start, NAME};
use support::{config, eventually, ms, opts};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_follow_a_failover_to_the_promoted_replica() {
    let deployment = start().await;
    let mut cfg = config(&[]);
    let mut sentinel = SentinelConfig::default();
    sentinel.sentinels = deployment.urls();
    sentinel.name = NAME.into();
    cfg.sentinel = Some(sentinel);
    let key = format!("{}res", cfg.key_prefix);
    let locks = Client::new(cfg, None).expect("valid config");
    assert!(locks.node_names()[0].starts_with("sentinel mymaster ("));

    let mut o = opts(3_000);
    o.wait_replicas = Some(1);
    o.wait_replicas_timeout = Some(ms(1_000));
    let lock = locks
        .acquire(vec!["res".into()], &o, CancellationToken::new())
        .await
        .expect("acquired through the sentinels");
    assert_eq!(lock.replicas(), Some(1));
    assert_eq!(
        deployment.master.get(&key).await.as_deref(),
        Some(lock.token())
    );

    let ok: String = deployment.sentinels[0]
        .query(redis::cmd("SENTINEL").arg("FAILOVER").arg(NAME))
        .await;
    assert_eq!(ok, "OK");
    let promoted = deployment.replica.port();
    for i in 0..3 {
        eventually(ms(15_000), "every sentinel to name the replica", || async {
            deployment.master_port(i).await == promoted
        })
        .await;
    }
    // The watchdog renews on the new master: its PTTL goes back up.
    let seen = deployment.replica.pttl(&key).await;
    eventually(ms(6_000), "a renewal on the promoted replica", || async {
        deployment.replica.pttl(&key).await > seen
    })
    .await;
    assert!(lock.is_held(), "the replicated lock is not lost");
    assert!(lock.release().await.expect("released"));
    assert_eq!(deployment.replica.get(&key).await, None);
    locks.close().await;
}
