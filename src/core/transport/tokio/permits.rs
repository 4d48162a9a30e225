//! A semaphore's reads on one node: its holders and its count.
//! Renewal and release go through the lock scripts, which know a semaphore's
//! sorted set.

use std::time::Duration;

use super::Node;
use crate::core::error::NodeAnswer;
use crate::core::ops::scripts;

/// The members of a semaphore's holders whose lease has not ended.
pub(super) async fn permit_holders(
    node: &Node,
    key: &str,
    timeout: Duration,
) -> Result<Vec<String>, NodeAnswer> {
    let mut con = node.connection_within(timeout).await?;
    let mut invocation = crate::core::ops::call::Call::new(&scripts::SEM_COUNT);
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
    let mut invocation = crate::core::ops::call::Call::new(&scripts::SEM_COUNT);
    invocation.key(key);
    node.invoke::<(u32, u32)>(&mut con, &invocation, timeout)
        .await
}
