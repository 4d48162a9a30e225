//! A Redis Cluster of real servers: six (three masters, three replicas), or a
//! small one of three masters for quorums of several clusters.

use std::process::Command;
use std::time::Duration;

use super::{eventually, RedisServer};

/// Cluster-mode servers, three of them masters. Every process is killed by
/// its PID when this is dropped.
pub struct Cluster {
    pub servers: Vec<RedisServer>,
}

impl Cluster {
    /// Three masters with one replica each.
    pub async fn start() -> Cluster {
        Cluster::with_replicas(1).await
    }

    /// Three masters, no replicas.
    pub async fn small() -> Cluster {
        Cluster::with_replicas(0).await
    }

    async fn with_replicas(replicas: usize) -> Cluster {
        let servers: Vec<RedisServer> = (0..3 * (1 + replicas))
            .map(|_| {
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ])
            })
            .collect();
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for s in &servers {
            create.arg(s.name());
        }
        let out = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = Cluster { servers };
        cluster.settled(Duration::from_secs(20)).await;
        cluster
    }

    pub fn seeds(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.url()).collect()
    }

    pub fn by_port(&self, port: u16) -> &RedisServer {
        self.servers
            .iter()
            .find(|s| s.port() == port)
            .expect("a server of this cluster")
    }

    /// Waits until every node reports `cluster_state:ok` and knows all the others.
    pub async fn settled(&self, within: Duration) {
        let known = format!("cluster_known_nodes:{}", self.servers.len());
        eventually(within, "the cluster is ok on every node", || async {
            for s in &self.servers {
                let info: String = s.query(redis::cmd("CLUSTER").arg("INFO")).await;
                if !info.contains("cluster_state:ok") || !info.contains(&known) {
                    return false;
                }
            }
            true
        })
        .await;
    }

    /// The master that answers `key` itself (the others redirect): its port and the value.
    pub async fn owner(&self, key: &str) -> Option<(u16, Option<String>)> {
        for s in &self.servers {
            let mut con = s.con().await;
            let got: redis::RedisResult<Option<String>> =
                redis::cmd("GET").arg(key).query_async(&mut con).await;
            if let Ok(v) = got {
                return Some((s.port(), v));
            }
        }
        None
    }

    pub async fn role(&self, port: u16) -> String {
        self.by_port(port)
            .info_field("replication", "role")
            .await
            .unwrap_or_default()
    }

    /// The port of a replica of the master on `port`.
    pub async fn replica_of(&self, port: u16) -> u16 {
        let line = self
            .by_port(port)
            .info_field("replication", "slave0")
            .await
            .expect("the master has a replica");
        line.split(',')
            .find_map(|kv| kv.strip_prefix("port="))
            .and_then(|p| p.parse().ok())
            .expect("a replica port")
    }
}
