//! A fair acquisition's operations on one node: taking a lock or permits in
//! line, handing a released lock to the next waiter, and leaving the line.

use std::time::Duration;

use super::{Connection, Node};
use crate::core::broken;
use crate::core::error::NodeAnswer;
use crate::core::keys::{self, CHANNEL_PREFIX};
use crate::core::model::FairLease;
use crate::core::ops::permits;
use crate::core::scripts;

/// A fair lock's line: a list of waiting tokens beside `key`, in its hash slot.
pub fn lock_line(key: &str) -> String {
    crate::core::model::line_keys(key)[0].clone()
}

/// Runs the fair lock's script: `Ok` when taken (or handed over already),
/// with the fence (0 without `lease.fence`); `Held` while another owner holds
/// the key or an earlier waiter is alive, its "remaining TTL" then the time
/// by which the place must be renewed.
pub(super) async fn acquire_fair(
    node: &Node,
    con: &mut Connection,
    lease: &FairLease<'_>,
    timeout: Duration,
) -> (NodeAnswer, i64) {
    let mut invocation = scripts::Call::new(&scripts::FAIR_ACQUIRE);
    invocation.key(lease.key);
    invocation.key(&lease.line[0]);
    if let Some(fence) = lease.fence {
        invocation.key(fence);
    }
    invocation
        .arg(lease.token)
        .arg(lease.ttl_ms)
        .arg(lease.place_ms)
        .arg(lease.attempt);
    permits::fair_granted(node.run(con, &invocation, timeout).await)
}

/// Releases a fair lock: the key goes straight to the first live waiter in
/// line (or is deleted when nobody waits), with the next value of its fence
/// counter when that waiter's place asks for one. With `leave`, a caller that
/// does not hold it leaves the line instead.
pub(super) async fn release_fair(
    node: &Node,
    key: &str,
    token: &str,
    leave: bool,
    timeout: Duration,
) -> NodeAnswer {
    let mut con = match node.connection_within(timeout).await {
        Ok(con) => con,
        Err(answer) => return answer,
    };
    let mut invocation = scripts::Call::new(&scripts::FAIR_RELEASE);
    invocation.key(key);
    // A cluster would broadcast every notice to all its nodes: none there.
    let notices = if node.is_cluster() {
        ""
    } else {
        CHANNEL_PREFIX
    };
    invocation
        .key(lock_line(key))
        .key(keys::fence_key(key))
        .arg(token)
        .arg(notices)
        .arg(if leave { "1" } else { "0" });
    permits::fair_released(node.run(&mut con, &invocation, timeout).await)
}

/// Runs the fair semaphore's script: `Ok` when the permits were taken,
/// `Held` (no remaining TTL: the caller keeps renewing its place) while
/// they do not fit beside those of every earlier waiter.
pub(super) async fn acquire_fair_permits(
    node: &Node,
    con: &mut Connection,
    lease: &FairLease<'_>,
    limit: u32,
    timeout: Duration,
) -> NodeAnswer {
    let mut invocation = scripts::Call::new(&scripts::FAIR_SEM_ACQUIRE);
    invocation.key(lease.key);
    invocation
        .key(&lease.line[0])
        .key(&lease.line[1])
        .arg(lease.token)
        .arg(lease.ttl_ms)
        .arg(broken::sem_limit(limit))
        .arg(lease.place_ms);
    permits::granted(node.run(con, &invocation, timeout).await, "fair semaphore")
}

/// Takes `token` out of a fair line (`line`: places, then their leases).
pub(super) async fn leave_line(node: &Node, line: &[String; 2], token: &str, timeout: Duration) {
    let Ok(mut con) = node.connection_within(timeout).await else {
        // Unreachable: the place expires with its lease.
        return;
    };
    let mut invocation = scripts::Call::new(&scripts::FAIR_LEAVE);
    invocation.key(&line[0]);
    invocation.key(&line[1]).arg(token);
    let _ = node.invoke::<i64>(&mut con, &invocation, timeout).await;
}
