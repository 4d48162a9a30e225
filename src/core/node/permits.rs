//! A semaphore's operations on one node: taking permits and counting them.
//! Renewal and release go through the lock scripts, which know a semaphore's
//! sorted set.

use std::time::Duration;

use super::ops::bounded;
use super::{Connection, Node};
use crate::core::acquire::{Lease, Permits};
use crate::core::broken;
use crate::core::error::NodeAnswer;
use crate::core::scripts;

impl Node {
    /// Runs the semaphore's acquire script: `Ok` when the permits were taken,
    /// `Held` (with the time until the earliest lease ends) when too few are free.
    pub async fn acquire_permits(
        &self,
        con: &mut Connection,
        lease: &Lease<'_>,
        p: Permits,
        timeout: Duration,
    ) -> NodeAnswer {
        let mut invocation = scripts::SEM_ACQUIRE.key(lease.key);
        invocation
            .key(lease.writer)
            .arg(lease.token)
            .arg(lease.ttl_ms)
            .arg(broken::sem_limit(p.limit))
            .arg(p.permits)
            .arg(p.kind_code())
            .arg(lease.mark_ms);
        let call = invocation.invoke_async::<Vec<i64>>(con);
        match bounded(timeout, call).await {
            Ok(reply) => match reply.as_slice() {
                [1, ..] => NodeAnswer::Ok,
                [0, wait, ..] => NodeAnswer::Held {
                    pttl_ms: u64::try_from(*wait).ok(),
                },
                _ => NodeAnswer::ErrorReply(format!("unexpected semaphore reply {reply:?}").into()),
            },
            Err(answer) => answer,
        }
    }

    /// Permits held (and holders) of a semaphore by unexpired holders.
    pub async fn count_permits(
        &self,
        key: &str,
        timeout: Duration,
    ) -> Result<(u32, u32), NodeAnswer> {
        let mut con = self.connection_within(timeout).await?;
        let invocation = scripts::SEM_COUNT.key(key);
        let call = invocation.invoke_async::<(u32, u32)>(&mut con);
        bounded(timeout, call).await
    }
}
