//! A master and its replica watched by three sentinels (quorum 2).

use super::replicas::{linked, with_replica};
use super::{eventually, ms, RedisServer};

pub const NAME: &str = "mymaster";

pub struct Sentinels {
    pub master: RedisServer,
    pub replica: RedisServer,
    pub sentinels: Vec<RedisServer>,
}

impl Sentinels {
    pub fn urls(&self) -> Vec<String> {
        self.sentinels.iter().map(|s| s.url()).collect()
    }

    /// The master's port as sentinel `i` names it.
    pub async fn master_port(&self, i: usize) -> u16 {
        let (_, port): (String, u16) = self.sentinels[i]
            .query(
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(NAME),
            )
            .await;
        port
    }
}

/// Starts the deployment; returns once every sentinel knows the replica and
/// its two peers (so that a failover can be agreed and has a replica to promote).
pub async fn start() -> Sentinels {
    let (master, replica) = with_replica();
    linked(&replica).await;
    let config = format!(
        "sentinel monitor {NAME} 127.0.0.1 {} 2\n\
         sentinel down-after-milliseconds {NAME} 1000\n\
         sentinel failover-timeout {NAME} 4000\n",
        master.port()
    );
    let sentinels: Vec<RedisServer> = (0..3)
        .map(|_| RedisServer::start_sentinel(&config))
        .collect();
    for s in &sentinels {
        eventually(
            ms(20_000),
            "a sentinel to know the replica and its peers",
            || async {
                let replicas: Vec<redis::Value> = s
                    .query(redis::cmd("SENTINEL").arg("REPLICAS").arg(NAME))
                    .await;
                let peers: Vec<redis::Value> = s
                    .query(redis::cmd("SENTINEL").arg("SENTINELS").arg(NAME))
                    .await;
                replicas.len() == 1 && peers.len() == 2
            },
        )
        .await;
    }
    Sentinels {
        master,
        replica,
        sentinels,
    }
}
