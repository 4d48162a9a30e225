//! One master with a replica (`waitReplicas`).

use super::{eventually, ms, RedisServer};

/// A master and one replica of it.
pub fn with_replica() -> (RedisServer, RedisServer) {
    // A full sync otherwise waits 5 s for more replicas (repl-diskless-sync-delay).
    let master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = master.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    (master, replica)
}

/// Waits until the replica has synced with its master.
pub async fn linked(replica: &RedisServer) {
    eventually(ms(30_000), "the replica to sync", || async {
        replica
            .try_info_field("replication", "master_link_status")
            .await
            .as_deref()
            == Some("up")
    })
    .await;
}
