//! Writes acknowledged by replicas (`waitReplicas`): the acquire script or an
//! extend, then `WAIT`, on a connection of their own, because WAIT blocks the
//! connection it runs on and counts the writes sent before it there.

use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};

use super::renewals::extend_on;
use super::reply::{bounded, fault};
use super::{Connection, Node, Renewal, Target};
use crate::core::error::NodeAnswer;
use crate::core::ops::call::Call;
use crate::core::ops::Answer;

/// How many acquisitions or extensions may wait for replicas at once, per node.
const ACKED_CONNECTIONS: usize = 4;

/// A node's WAIT connections, each opened on first use.
#[derive(Default)]
pub(super) struct Pool([Mutex<Option<Connection>>; ACKED_CONNECTIONS]);

impl Pool {
    /// Drops the idle connections (a busy one goes when its caller is done).
    pub(super) fn clear(&self) {
        for place in &self.0 {
            if let Ok(mut place) = place.try_lock() {
                *place = None;
            }
        }
    }
}

type Held<'a> = (MutexGuard<'a, Option<Connection>>, Connection);

/// A free connection for replica-acknowledged writes (opened on first use,
/// within the connect timeout).
async fn acked_connection(node: &Node) -> Result<Held<'_>, NodeAnswer> {
    if matches!(node.target, Target::Cluster(_)) {
        return Err(NodeAnswer::ErrorReply(
            "waitReplicas needs a single master".into(),
        ));
    }
    let mut place = match node.acked.0.iter().find_map(|m| m.try_lock().ok()) {
        Some(place) => place,
        None => node.acked.0[0].lock().await,
    };
    if node.is_closed() {
        return Err(NodeAnswer::Unreachable("the client is closed".into()));
    }
    if place.as_ref().is_some_and(|c| node.is_stale(c)) {
        *place = None; // the master moved: follow it
    }
    if place.is_none() {
        // WAIT may block for its whole timeout: the reply deadline is ours
        // (the shared config sets no response timeout of its own).
        let opened = match &node.target {
            Target::Single(client, config) => tokio::time::timeout(
                node.connect_timeout,
                client.get_connection_manager_with_config(config.clone()),
            )
            .await
            .map(|r| r.map(Connection::single)),
            Target::Sentinel(s) => tokio::time::timeout(node.connect_timeout, s.open())
                .await
                .map(|r| r.map(Connection::sentinel)),
            Target::Cluster(_) => return Err(NodeAnswer::Timeout),
        };
        match opened {
            Ok(Ok(con)) => *place = Some(con),
            Ok(Err(e)) => return Err(fault(e)),
            Err(_) => return Err(NodeAnswer::Timeout),
        }
    }
    let con = place.clone().ok_or(NodeAnswer::Timeout)?;
    Ok((place, con))
}

/// An acquisition's attempt `call`, then `WAIT replicas wait` once it took
/// the lock (`taken` reads its reply), on a connection of their own. The
/// second value is how many replicas acknowledged (`None` when the lock was
/// not taken or WAIT failed).
pub(super) async fn send_acked(
    node: &Node,
    call: &Call<'_>,
    taken: fn(&Answer) -> bool,
    timeout: Duration,
    (replicas, wait): (u32, Duration),
) -> (Answer, Option<u32>) {
    let (_place, mut con) = match acked_connection(node).await {
        Ok(got) => got,
        Err(answer) => return (Err(answer), None),
    };
    let answer = node.run(&mut con, call, timeout).await;
    if !taken(&answer) {
        return (answer, None);
    }
    let acked = wait_replicas(&mut con, replicas, wait, timeout).await;
    (answer, acked)
}

/// [`Node::extend_batch`] for one lock, then `WAIT`, on a connection of their own.
pub(super) async fn extend_acked(
    node: &Node,
    renewal: &Renewal<'_>,
    timeout: Duration,
    (replicas, wait): (u32, Duration),
) -> (NodeAnswer, Option<u32>) {
    let (_place, mut con) = match acked_connection(node).await {
        Ok(got) => got,
        Err(answer) => return (answer, None),
    };
    let batch = std::slice::from_ref(renewal);
    let answer = extend_on(&mut con, batch, None, timeout)
        .await
        .pop()
        .unwrap_or(NodeAnswer::Timeout);
    if answer != NodeAnswer::Ok {
        return (answer, None);
    }
    let acked = wait_replicas(&mut con, replicas, wait, timeout).await;
    (answer, acked)
}

/// `WAIT replicas wait_ms`: how many replicas acknowledged the writes this
/// connection sent before it (`None` if the call failed).
async fn wait_replicas(
    con: &mut Connection,
    replicas: u32,
    wait: Duration,
    timeout: Duration,
) -> Option<u32> {
    let mut cmd = redis::cmd("WAIT");
    cmd.arg(replicas).arg(wait.as_millis().max(1) as u64);
    bounded(
        con.pace().as_ref(),
        wait + timeout,
        cmd.query_async::<i64>(con),
    )
    .await
    .ok()
    .map(|n| u32::try_from(n).unwrap_or(0))
}
