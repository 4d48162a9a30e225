//! A semaphore's operations on one node: taking permits and counting them.
//! Renewal and release go through the lock scripts, which know a semaphore's
//! sorted set.

use std::time::Duration;

use super::{Connection, Node};
use crate::core::error::NodeAnswer;
use crate::core::keys::CHANNEL_PREFIX;
use crate::core::model::{Permits, PermitsLease};
use crate::core::ops::permits::{self, SlotReply};
use crate::core::scripts;

/// Runs the semaphore's acquire script: `Ok` when the permits were taken,
/// `Held` (with the time until the earliest lease ends) when too few are free.
pub(super) async fn acquire_permits(
    node: &Node,
    con: &mut Connection,
    lease: &PermitsLease<'_>,
    p: Permits,
    timeout: Duration,
) -> NodeAnswer {
    let invocation = permits::call(lease, p);
    permits::granted(node.run(con, &invocation, timeout).await, "semaphore")
}

/// Runs the Redlock semaphore's script (see `sem_slots.lua`): the free
/// slots are tried from `first` on, in the same order on every node.
#[allow(clippy::too_many_arguments)]
pub(super) async fn acquire_slots(
    node: &Node,
    con: &mut Connection,
    key: &str,
    token: &str,
    ttl_ms: u64,
    p: Permits,
    first: u32,
    timeout: Duration,
) -> SlotReply {
    let mut invocation = scripts::Call::new(&scripts::SEM_SLOTS);
    invocation.key(key);
    invocation
        .arg(token)
        .arg(ttl_ms)
        .arg(p.limit)
        .arg(p.permits)
        .arg(first);
    permits::slots(node.run(con, &invocation, timeout).await)
}

/// Removes what the attempt `token` wrote at the Redlock semaphore `key`,
/// except the member `keep` (see `sem_undo.lua`); announces the permits freed.
pub(super) async fn undo_slots(
    node: &Node,
    key: &str,
    token: &str,
    keep: &str,
    timeout: Duration,
) -> NodeAnswer {
    let mut con = match node.connection_within(timeout).await {
        Ok(con) => con,
        Err(answer) => return answer,
    };
    let notices = if node.is_cluster() {
        ""
    } else {
        CHANNEL_PREFIX
    };
    let mut invocation = scripts::Call::new(&scripts::SEM_UNDO);
    invocation.key(key);
    invocation.arg(token).arg(keep).arg(notices);
    let call = node.invoke::<i64>(&mut con, &invocation, timeout);
    match call.await {
        Ok(_) => NodeAnswer::Ok,
        Err(answer) => answer,
    }
}

/// The members of a semaphore's holders whose lease has not ended.
pub(super) async fn permit_holders(
    node: &Node,
    key: &str,
    timeout: Duration,
) -> Result<Vec<String>, NodeAnswer> {
    let mut con = node.connection_within(timeout).await?;
    let mut invocation = scripts::Call::new(&scripts::SEM_COUNT);
    invocation.key(key);
    invocation.arg("members");
    node.invoke::<Vec<String>>(&mut con, &invocation, timeout)
        .await
}

/// Permits held (and holders) of a semaphore by unexpired holders.
pub(super) async fn count_permits(
    node: &Node,
    key: &str,
    timeout: Duration,
) -> Result<(u32, u32), NodeAnswer> {
    let mut con = node.connection_within(timeout).await?;
    let mut invocation = scripts::Call::new(&scripts::SEM_COUNT);
    invocation.key(key);
    node.invoke::<(u32, u32)>(&mut con, &invocation, timeout)
        .await
}
