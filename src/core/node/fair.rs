//! A fair acquisition's operations on one node: taking permits in line, and
//! leaving the line.

use std::time::Duration;

use super::ops::bounded;
use super::{Connection, Node};
use crate::core::acquire::FairLease;
use crate::core::error::NodeAnswer;
use crate::core::scripts;

impl Node {
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
            .arg(limit)
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
