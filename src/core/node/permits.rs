//! A semaphore's operations on one node: taking permits and counting them.
//! Renewal and release go through the lock scripts, which know a semaphore's
//! sorted set.

use std::time::Duration;

use super::ops::bounded;
use super::{Connection, Node};
use crate::core::acquire::{Lease, Permits};
use crate::core::broken;
use crate::core::error::NodeAnswer;
use crate::core::keys::CHANNEL_PREFIX;
use crate::core::scripts;

/// One node's answer to an attempt at a semaphore on several nodes.
#[derive(Debug, Clone, PartialEq)]
pub enum SlotReply {
    /// The node granted the permits as the slots named in this member.
    Granted(String),
    /// Too few slots were free: nothing written (ms until the earliest lease ends).
    Busy(Option<u64>),
    /// No usable answer.
    Failed(NodeAnswer),
}

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

    /// Runs the Redlock semaphore's script (see `sem_slots.lua`): the free
    /// slots are tried from `first` on, in the same order on every node.
    #[allow(clippy::too_many_arguments)]
    pub async fn acquire_slots(
        &self,
        con: &mut Connection,
        key: &str,
        token: &str,
        ttl_ms: u64,
        p: Permits,
        first: u32,
        timeout: Duration,
    ) -> SlotReply {
        let mut invocation = scripts::SEM_SLOTS.key(key);
        invocation
            .arg(token)
            .arg(ttl_ms)
            .arg(p.limit)
            .arg(p.permits)
            .arg(first);
        let call = invocation.invoke_async::<Vec<redis::Value>>(con);
        match bounded(timeout, call).await {
            Ok(reply) => match reply.as_slice() {
                [redis::Value::Int(1), _, redis::Value::BulkString(member)] => {
                    match String::from_utf8(member.clone()) {
                        Ok(member) => SlotReply::Granted(member),
                        Err(_) => SlotReply::Failed(NodeAnswer::ErrorReply(
                            "semaphore member is not UTF-8".to_string().into(),
                        )),
                    }
                }
                [redis::Value::Int(0), redis::Value::Int(wait), ..] => {
                    SlotReply::Busy(u64::try_from(*wait).ok())
                }
                _ => SlotReply::Failed(NodeAnswer::ErrorReply(
                    format!("unexpected semaphore reply {reply:?}").into(),
                )),
            },
            Err(answer) => SlotReply::Failed(answer),
        }
    }

    /// Removes what the attempt `token` wrote at the Redlock semaphore `key`,
    /// except the member `keep` (see `sem_undo.lua`); announces the permits freed.
    pub async fn undo_slots(
        &self,
        key: &str,
        token: &str,
        keep: &str,
        timeout: Duration,
    ) -> NodeAnswer {
        let mut con = match self.connection_within(timeout).await {
            Ok(con) => con,
            Err(answer) => return answer,
        };
        let notices = if self.is_cluster() {
            ""
        } else {
            CHANNEL_PREFIX
        };
        let mut invocation = scripts::SEM_UNDO.key(key);
        invocation.arg(token).arg(keep).arg(notices);
        let call = invocation.invoke_async::<i64>(&mut con);
        match bounded(timeout, call).await {
            Ok(_) => NodeAnswer::Ok,
            Err(answer) => answer,
        }
    }

    /// The members of a semaphore's holders whose lease has not ended.
    pub async fn permit_holders(
        &self,
        key: &str,
        timeout: Duration,
    ) -> Result<Vec<String>, NodeAnswer> {
        let mut con = self.connection_within(timeout).await?;
        let mut invocation = scripts::SEM_COUNT.key(key);
        invocation.arg("members");
        let call = invocation.invoke_async::<Vec<String>>(&mut con);
        bounded(timeout, call).await
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
