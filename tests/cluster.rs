//! Redis Cluster against a real local cluster of 3 masters with one replica
//! each: routing by key, the lock lifecycle, hash-slot checks, and a manual
//! failover while locks are held; and a Redlock quorum of a master and two
//! small clusters.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use lockdog::core::model::keys::key_slot;
use lockdog::core::{
    Client, ClientConfig, ErrorCode, Event, EventHook, Lock, NodeAnswer, NodeSpec,
};
use tokio_util::sync::CancellationToken;

use support::cluster::Cluster;
use support::{config, eventually, ms, opts, within, RedisServer};

/// `(lock id, code)` of every lost lock the hook saw.
type LostEvents = Arc<Mutex<Vec<(u64, ErrorCode)>>>;

fn cluster_config(cluster: &Cluster) -> ClientConfig {
    let mut cfg = config(&[]);
    cfg.nodes = vec![NodeSpec::Cluster(cluster.seeds())];
    cfg
}

fn client(cfg: ClientConfig) -> (Client, LostEvents) {
    let lost: LostEvents = Arc::default();
    let sink = lost.clone();
    let hook: EventHook = Arc::new(move |e: Event<'_>| {
        if let Event::Lost { id, error } = e {
            sink.lock().expect("hook mutex").push((id, error.code));
        }
    });
    (Client::new(cfg, Some(hook)).expect("valid config"), lost)
}

fn acquire<'a>(
    client: &'a Client,
    keys: &[&str],
    ttl_ms: u64,
) -> impl std::future::Future<Output = Lock> + 'a {
    let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    async move {
        within(
            Duration::from_secs(5),
            "acquire",
            client.acquire(keys, &opts(ttl_ms), CancellationToken::new()),
        )
        .await
        .expect("acquired")
    }
}

#[test]
fn cross_slot_keys_are_rejected_before_any_io() {
    let mut cfg = ClientConfig::default();
    // Nothing listens here: the checks must not need a connection.
    cfg.nodes = vec![NodeSpec::Cluster(vec![
        "redis://127.0.0.1:1".into(),
        "redis://127.0.0.1:2".into(),
    ])];
    let client = Client::new(cfg.clone(), None).expect("valid config");
    assert_eq!(client.node_names().len(), 1, "a cluster is one lock node");
    let keys = |ks: &[&str]| ks.iter().map(|k| k.to_string()).collect::<Vec<_>>();
    let o = opts(1000);
    assert!(client
        .prepare(keys(&["order:{42}:pay", "order:{42}:ship"]), &o)
        .is_ok());
    let err = client
        .prepare(keys(&["order:42:pay", "order:42:ship"]), &o)
        .err()
        .expect("cross-slot keys are rejected");
    assert_eq!(err.code, ErrorCode::InvalidArgValue);
    assert!(err.message.contains("hash tag"), "{}", err.message);

    cfg.fencing = true;
    let fencing = Client::new(cfg, None).expect("valid config");
    assert!(fencing.prepare(keys(&["plain"]), &o).is_ok());
    let err = fencing
        .prepare(keys(&["a}b"]), &o)
        .err()
        .expect("its fence counter would land in another slot");
    assert_eq!(err.code, ErrorCode::InvalidArgValue);

    let mut bad = ClientConfig::default();
    bad.nodes = vec![NodeSpec::Cluster(vec!["unix:///tmp/redis.sock".into()])];
    assert_eq!(
        Client::new(bad, None).err().map(|e| e.code),
        Some(ErrorCode::InvalidArgValue)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_on_a_cluster_survive_a_manual_failover() {
    let cluster = Cluster::start().await;
    let cfg = cluster_config(&cluster);
    let prefix = cfg.key_prefix.clone();
    let full = |name: &str| format!("{prefix}{name}");
    let (locks, lost) = client(cfg.clone());

    // Locks on many keys spread over the three masters, each on its slot's owner.
    let names: Vec<String> = (0..24).map(|i| format!("spread:{i}")).collect();
    let held = join_all(names.iter().map(|n| acquire(&locks, &[n.as_str()], 10_000))).await;
    let mut per_master: HashMap<u16, usize> = HashMap::new();
    for (name, lock) in names.iter().zip(&held) {
        let key = full(name);
        let slot: i64 = cluster.servers[0]
            .query(redis::cmd("CLUSTER").arg("KEYSLOT").arg(&key))
            .await;
        assert_eq!(slot, i64::from(key_slot(&key)), "slot of {key}");
        let (port, value) = cluster.owner(&key).await.expect("an owner");
        assert_eq!(value.as_deref(), Some(lock.token()), "{key} on its owner");
        *per_master.entry(port).or_default() += 1;
    }
    assert_eq!(per_master.len(), 3, "keys on every master: {per_master:?}");

    // extend and release, routed by key.
    let first = &held[0];
    first.extend(ms(20_000)).await.expect("extended");
    let (port, _) = cluster.owner(&full(&names[0])).await.expect("an owner");
    assert!(cluster.by_port(port).pttl(&full(&names[0])).await > 10_000);
    for lock in &held {
        assert!(lock.release().await.expect("released"));
    }
    for name in &names {
        assert_eq!(cluster.owner(&full(name)).await.expect("owner").1, None);
    }

    // Several keys in one slot: one lock; another owner is refused.
    let tagged = acquire(&locks, &["order:{42}:pay", "order:{42}:ship"], 5_000).await;
    let (other, _) = client(cfg.clone());
    let taken = other
        .try_acquire(vec!["order:{42}:ship".into()], &opts(5_000))
        .await
        .expect("answered");
    assert!(taken.is_none(), "held by the first client");
    assert!(tagged.release().await.expect("released"));

    // Fencing on a cluster: the counter shares the key's slot.
    let mut fenced_cfg = cfg.clone();
    fenced_cfg.fencing = true;
    let (fenced, _) = client(fenced_cfg);
    let a = acquire(&fenced, &["fenced"], 5_000).await;
    let fa = a.fence().expect("a fence");
    a.release().await.expect("released");
    let b = acquire(&fenced, &["fenced"], 5_000).await;
    assert!(b.fence().expect("a fence") > fa);
    b.release().await.expect("released");

    // The watchdog renews locks on every master in one batch.
    let watched_names: Vec<String> = (0..24).map(|i| format!("watched:{i}")).collect();
    let watched = join_all(
        watched_names
            .iter()
            .map(|n| acquire(&locks, &[n.as_str()], 1_500)),
    )
    .await;
    tokio::time::sleep(ms(2_000)).await;
    for lock in &watched {
        assert!(lock.is_held(), "renewed past its 1500 ms ttl");
    }
    assert!(lost.lock().expect("hook mutex").is_empty());

    // Manual failover of the master holding the most watched keys.
    let mut owners: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, name) in watched_names.iter().enumerate() {
        let (port, _) = cluster.owner(&full(name)).await.expect("an owner");
        owners.entry(port).or_default().push(i);
    }
    let (&old_master, victims) = owners
        .iter()
        .max_by_key(|(_, v)| v.len())
        .expect("some master");
    let victims = victims.clone();
    let replica = cluster.replica_of(old_master).await;
    let started = Instant::now();
    let _: String = cluster
        .by_port(replica)
        .query(redis::cmd("CLUSTER").arg("FAILOVER"))
        .await;
    eventually(
        Duration::from_secs(10),
        "the replica is promoted",
        || async { cluster.role(replica).await == "master" },
    )
    .await;
    cluster.settled(Duration::from_secs(10)).await;
    let promoted_in = started.elapsed();

    // Two renewal periods later every lock is either renewed on the new owner or
    // reported lost: never held locally with its key gone or foreign.
    tokio::time::sleep(ms(700)).await;
    let lost_ids: Vec<u64> = lost
        .lock()
        .expect("hook mutex")
        .iter()
        .map(|(id, code)| {
            assert_eq!(*code, ErrorCode::Lost);
            *id
        })
        .collect();
    let mut still_held = 0;
    for (i, (name, lock)) in watched_names.iter().zip(&watched).enumerate() {
        // Renewals settle lock by lock: the other masters' locks never wait on the stalled one.
        assert!(
            victims.contains(&i) || lock.is_held(),
            "{name} was not on the failed-over master"
        );
        let (port, value) = cluster.owner(&full(name)).await.expect("an owner");
        if lock.is_held() {
            assert_eq!(value.as_deref(), Some(lock.token()), "{name} on {port}");
            still_held += 1;
        } else {
            assert!(lost_ids.contains(&lock.id()), "{name} ended silently");
        }
    }
    for &i in &victims {
        let (port, _) = cluster
            .owner(&full(&watched_names[i]))
            .await
            .expect("owner");
        assert_eq!(port, replica, "the promoted replica owns the slot now");
    }
    eprintln!(
        "failover in {promoted_in:?}: {still_held} of {} locks still held, {} lost ({} were on the failed-over master)",
        watched.len(),
        lost_ids.len(),
        victims.len()
    );

    // New acquisitions in the failed-over slots land on the promoted master.
    for &i in &victims {
        // Tagged with the victim's whole key (prefix included): the same slot.
        let name = format!("{{{}}}:again", full(&watched_names[i]));
        let lock = acquire(&locks, &[name.as_str()], 5_000).await;
        let (port, value) = cluster.owner(&full(&name)).await.expect("an owner");
        assert_eq!((port, value.as_deref()), (replica, Some(lock.token())));
        assert!(lock.release().await.expect("released"));
    }
    for lock in watched.iter().filter(|l| l.is_held()) {
        assert!(lock.release().await.expect("released"));
    }
    locks.close().await;
    other.close().await;
    fenced.close().await;
}

/// One plain master and two clusters of three masters: three lock nodes, quorum 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_of_a_master_and_two_clusters() {
    let master = RedisServer::start();
    // One after the other: starting a cluster blocks (redis-cli --cluster create).
    let first = Cluster::small().await;
    let mut second = Cluster::small().await;
    let mut cfg = config(&[&master]);
    cfg.nodes.push(NodeSpec::Cluster(first.seeds()));
    cfg.nodes.push(NodeSpec::Cluster(second.seeds()));
    let prefix = cfg.key_prefix.clone();
    let full = |name: &str| format!("{prefix}{name}");
    let (locks, lost) = client(cfg.clone());
    assert_eq!(locks.node_names().len(), 3, "each cluster is one lock node");
    assert!(locks.node_names()[1].starts_with("cluster "));

    // A multi-key lock must keep to one slot, as on a lone cluster.
    let err = locks
        .prepare(vec!["m:1".into(), "m:2".into()], &opts(1_000))
        .err()
        .expect("cross-slot keys are refused with a cluster member");
    assert_eq!(err.code, ErrorCode::InvalidArgValue);

    // acquire: every node holds the keys (on each cluster, on its slot's owner).
    let names = ["order:{7}:pay", "order:{7}:ship"];
    let lock = acquire(&locks, &names, 600).await;
    locks.settled().await;
    for name in names {
        let key = full(name);
        assert_eq!(master.get(&key).await.as_deref(), Some(lock.token()));
        for c in [&first, &second] {
            let (_, value) = c.owner(&key).await.expect("an owner");
            assert_eq!(value.as_deref(), Some(lock.token()), "{key} on a cluster");
        }
    }
    assert!(lock.nodes().iter().all(|n| n.answer == NodeAnswer::Ok));

    // The watchdog renews on all three past several leases.
    tokio::time::sleep(ms(1_500)).await;
    assert!(lock.is_held(), "renewed on the mixed quorum");
    for c in [&first, &second] {
        let (port, _) = c.owner(&full(names[0])).await.expect("an owner");
        assert!(c.by_port(port).pttl(&full(names[0])).await > 300);
    }
    assert!(master.pttl(&full(names[1])).await > 300);

    // Many locks renewed together: per cluster member, one pipelined batch per
    // hash slot (locks sharing a slot in one script call), slots side by side.
    let spread: Vec<String> = (0..8)
        .map(|i| format!("batch:{{{}}}:{}", i % 4, i))
        .collect();
    let batch = join_all(spread.iter().map(|n| acquire(&locks, &[n.as_str()], 600))).await;
    tokio::time::sleep(ms(1_500)).await;
    for (name, lock) in spread.iter().zip(&batch) {
        assert!(lock.is_held(), "{name} renewed");
        for c in [&first, &second] {
            let (port, value) = c.owner(&full(name)).await.expect("an owner");
            assert_eq!(value.as_deref(), Some(lock.token()), "{name}");
            assert!(c.by_port(port).pttl(&full(name)).await > 300, "{name}");
        }
    }
    for lock in &batch {
        assert!(lock.release().await.expect("released"));
    }

    // A waiter for a held key: release notices come from the master only, so
    // it keeps its retry timer and takes the lock soon after the release.
    let holder = acquire(&locks, &["waited"], 10_000).await;
    let mut waiting = opts(10_000);
    waiting.retry_delay = Some(ms(50));
    waiting.retry_jitter = Some(ms(10));
    waiting.wait_timeout = Some(ms(5_000));
    let (waiter_client, _) = client(cfg.clone());
    let waiter = tokio::spawn(async move {
        let started = Instant::now();
        let lock = waiter_client
            .acquire(vec!["waited".into()], &waiting, CancellationToken::new())
            .await;
        (lock, started.elapsed())
    });
    tokio::time::sleep(ms(300)).await;
    let released_at = Instant::now();
    assert!(holder.release().await.expect("released"));
    let (taken, waited) = within(Duration::from_secs(5), "the waiter", waiter)
        .await
        .expect("the waiter task");
    let taken = taken.expect("taken after the release");
    assert!(waited >= ms(300), "it waited for the holder: {waited:?}");
    assert!(
        released_at.elapsed() < ms(1_000),
        "taken soon after the release"
    );
    assert!(taken.release().await.expect("released"));

    // Another owner is refused; the release frees every node.
    let (other, _) = client(cfg.clone());
    let taken = other
        .try_acquire(vec!["order:{7}:ship".into()], &opts(1_000))
        .await
        .expect("an answer");
    assert!(taken.is_none(), "held on a quorum");
    assert!(lock.release().await.expect("released"));
    locks.settled().await;
    for name in names {
        let key = full(name);
        assert_eq!(master.get(&key).await, None);
        for c in [&first, &second] {
            assert_eq!(c.owner(&key).await.expect("an owner").1, None);
        }
    }

    // A cluster member down is one vote against: 2 of 3 still lock.
    for s in &mut second.servers {
        s.kill();
    }
    let lock = acquire(&locks, &["down"], 10_000).await;
    locks.settled().await;
    let answers: Vec<NodeAnswer> = lock.nodes().into_iter().map(|n| n.answer).collect();
    assert_eq!(answers[..2], [NodeAnswer::Ok, NodeAnswer::Ok]);
    assert!(answers[2].is_fault(), "the dead cluster: {:?}", answers[2]);
    lock.extend(ms(10_000)).await.expect("extended on 2 of 3");
    // With the master held by another owner too, no quorum is left.
    master.set(&full("theirs"), "another owner").await;
    let refused = locks.try_acquire(vec!["theirs".into()], &opts(1_000)).await;
    assert!(
        matches!(&refused, Ok(None)) || matches!(&refused, Err(e) if e.code == ErrorCode::Quorum),
        "one vote for of three: {:?}",
        refused.as_ref().map(Option::is_some)
    );
    assert!(lock.release().await.expect("released"));
    assert!(lost.lock().expect("hook mutex").is_empty());
}
