//! A fair acquisition's operations on one node: taking a lock or permits in
//! line, handing a released lock to the next waiter, and leaving the line.

use std::time::Duration;

use super::ops::bounded;
use super::{Connection, Node};
use crate::core::acquire::FairLease;
use crate::core::broken;
use crate::core::error::NodeAnswer;
use crate::core::keys::CHANNEL_PREFIX;
use crate::core::scripts;

/// A fair lock's tokens start with this, so its release hands the key on.
pub const FAIR_TOKEN: &str = "f:";

/// A fair lock's line: a list of waiting tokens beside `key`, in its hash slot.
pub fn lock_line(key: &str) -> String {
    crate::core::acquire::line_keys(key)[0].clone()
}

impl Node {
    /// Runs the fair lock's script: `Ok` when taken (or handed over already),
    /// `Held` while another owner holds the key or an earlier waiter is alive,
    /// its "remaining TTL" then the time by which the place must be renewed.
    pub async fn acquire_fair(
        &self,
        con: &mut Connection,
        lease: &FairLease<'_>,
        timeout: Duration,
    ) -> NodeAnswer {
        let mut invocation = scripts::FAIR_ACQUIRE.key(lease.key);
        invocation
            .key(&lease.line[0])
            .arg(lease.token)
            .arg(lease.ttl_ms)
            .arg(lease.place_ms)
            .arg(lease.attempt);
        let call = invocation.invoke_async::<Vec<i64>>(con);
        match bounded(timeout, call).await {
            Ok(reply) => match reply.as_slice() {
                [1, ..] => NodeAnswer::Ok,
                [0, renew_by, ..] => NodeAnswer::Held {
                    pttl_ms: u64::try_from(*renew_by).ok(),
                },
                _ => NodeAnswer::ErrorReply(format!("unexpected fair-lock reply {reply:?}").into()),
            },
            Err(answer) => answer,
        }
    }

    /// Releases a fair lock: the key goes straight to the first live waiter in
    /// line (or is deleted when nobody waits). With `leave`, a caller that does
    /// not hold it leaves the line instead.
    pub async fn release_fair(
        &self,
        key: &str,
        token: &str,
        leave: bool,
        timeout: Duration,
    ) -> NodeAnswer {
        let mut con = match self.connection_within(timeout).await {
            Ok(con) => con,
            Err(answer) => return answer,
        };
        let mut invocation = scripts::FAIR_RELEASE.key(key);
        // A cluster would broadcast every notice to all its nodes: none there.
        let notices = if self.is_cluster() {
            ""
        } else {
            CHANNEL_PREFIX
        };
        invocation
            .key(lock_line(key))
            .arg(token)
            .arg(notices)
            .arg(if leave { "1" } else { "0" });
        match bounded(timeout, invocation.invoke_async::<i64>(&mut con)).await {
            Ok(1) => NodeAnswer::Ok,
            Ok(_) => NodeAnswer::NotHeld,
            Err(answer) => answer,
        }
    }

    /// Runs the fair semaphore's script: `Ok` when the permits were taken,
    /// `Held` (no remaining TTL: the caller keeps renewing its place) while
    /// they do not fit beside those of every earlier waiter.
    pub async fn acquire_fair_permits(
        &self,
        con: &mut Connection,
        lease: &FairLease<'_>,
        limit: u32,
        timeout: Duration,
    ) -> NodeAnswer {
        let mut invocation = scripts::FAIR_SEM_ACQUIRE.key(lease.key);
        invocation
            .key(&lease.line[0])
            .key(&lease.line[1])
            .arg(lease.token)
            .arg(lease.ttl_ms)
            .arg(broken::sem_limit(limit))
            .arg(lease.place_ms);
        let call = invocation.invoke_async::<Vec<i64>>(con);
        match bounded(timeout, call).await {
            Ok(reply) => match reply.as_slice() {
                [1, ..] => NodeAnswer::Ok,
                [0, wait, ..] => NodeAnswer::Held {
                    pttl_ms: u64::try_from(*wait).ok(),
                },
                _ => NodeAnswer::ErrorReply(
                    format!("unexpected fair semaphore reply {reply:?}").into(),
                ),
            },
            Err(answer) => answer,
        }
    }

    /// Takes `token` out of a fair line (`line`: places, then their leases).
    pub async fn leave_line(&self, line: &[String; 2], token: &str, timeout: Duration) {
        let Ok(mut con) = self.connection_within(timeout).await else {
            // Unreachable: the place expires with its lease.
            return;
        };
        let mut invocation = scripts::FAIR_LEAVE.key(&line[0]);
        invocation.key(&line[1]).arg(token);
        let _ = bounded(timeout, invocation.invoke_async::<i64>(&mut con)).await;
    }
}
