//! What a lock node is: one Redis master, a Redis Cluster (one vote whose
//! commands route by key), or a master found through Redis Sentinel.

use crate::core::error::{LockError, Result};

/// One lock node: one vote in the quorum.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum NodeSpec {
    /// One Redis master, by URL.
    Master(String),
    /// A Redis Cluster, by its seed URLs: one vote whose commands route by key,
    /// so a lock's keys must share a hash slot.
    Cluster(Vec<String>),
}

impl From<String> for NodeSpec {
    fn from(url: String) -> Self {
        NodeSpec::Master(url)
    }
}

impl From<&str> for NodeSpec {
    fn from(url: &str) -> Self {
        NodeSpec::Master(url.to_string())
    }
}

impl NodeSpec {
    pub fn is_cluster(&self) -> bool {
        matches!(self, NodeSpec::Cluster(_))
    }
}

/// A master found through Redis Sentinel.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct SentinelConfig {
    /// `redis://[user:password@]host:port` of each sentinel, asked in turn.
    pub sentinels: Vec<String>,
    /// The name the sentinels monitor the master under.
    pub name: String,
    /// Credentials for sentinels whose URL carries none.
    pub sentinel_username: Option<String>,
    pub sentinel_password: Option<String>,
    /// Credentials for the master.
    pub username: Option<String>,
    pub password: Option<String>,
    /// The master's database number.
    pub db: i64,
}

impl SentinelConfig {
    pub fn validate(&self) -> Result<()> {
        if self.sentinels.is_empty() {
            return Err(LockError::invalid_value(
                "sentinel.sentinels",
                "must list at least one sentinel URL",
            ));
        }
        if let Some(url) = self.sentinels.iter().find(|u| !u.starts_with("redis://")) {
            let reason = if url.starts_with("rediss://") {
                "must list redis:// URLs (TLS to sentinels is not supported)"
            } else {
                "must list redis:// URLs"
            };
            return Err(LockError::invalid_value("sentinel.sentinels", reason));
        }
        if self.name.is_empty() {
            return Err(LockError::invalid_value(
                "sentinel.name",
                "must be the name the sentinels monitor the master under (a non-empty string)",
            ));
        }
        Ok(())
    }
}

impl std::fmt::Debug for SentinelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print passwords (the sentinel URLs may carry some).
        f.debug_struct("SentinelConfig")
            .field("sentinels", &self.sentinels.len())
            .field("name", &self.name)
            .field("db", &self.db)
            .finish()
    }
}
