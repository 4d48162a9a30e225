//! What goes back to JS as plain objects: a client's counters, an
//! inspection of a lock key, a semaphore's count, a node's health.

use napi_derive::napi;

use napi::bindgen_prelude::{Either, Null};

use crate::core::engine::stats::StatsSnapshot;
use crate::core::{self as core};

/// Counters of a client since it was created.
#[napi(object)]
pub struct LockStats {
    /// Locks taken.
    pub acquired: f64,
    /// Attempts that found the lock held by another owner.
    pub contended: f64,
    /// Successful renewals and extensions.
    pub renewed: f64,
    /// Locks lost while held (found by a renewal, by the clock, or by the
    /// holder's own release).
    pub lost: f64,
    /// Locks released by their holder.
    pub released: f64,
    /// Node failures seen (unreachable, timeout, error reply).
    pub errors: f64,
    /// Locks held right now.
    pub held: f64,
    /// Waits for a held lock that its release notice ended (rather than a retry timer).
    pub woken: f64,
    /// Acquisitions run on the addon's tokio runtime rather than on the JS
    /// thread's own loop (Bun and Deno, TLS, Cluster, Sentinel, `waitReplicas`,
    /// or made while a connection owed 8,192 replies).
    pub on_tokio: f64,
}

impl From<StatsSnapshot> for LockStats {
    fn from(s: StatsSnapshot) -> Self {
        LockStats {
            acquired: s.acquired as f64,
            contended: s.contended as f64,
            renewed: s.renewed as f64,
            lost: s.lost as f64,
            released: s.released as f64,
            errors: s.errors as f64,
            held: s.held as f64,
            woken: s.woken as f64,
            on_tokio: s.on_tokio as f64,
        }
    }
}

/// What `inspect(key)` found, without changing anything.
#[napi(object)]
pub struct LockInspection {
    /// True when a quorum of nodes holds the key with one value.
    pub held: bool,
    /// The holder's remaining TTL in ms (the shortest among the quorum), or null.
    pub remaining_ms: Option<f64>,
    /// The holder's token, masked to its first 8 characters, or null.
    pub holder: Option<String>,
    /// The key's fence counter (the last token handed out), or null.
    pub fence: Option<f64>,
}

impl From<core::Inspection> for LockInspection {
    fn from(i: core::Inspection) -> Self {
        LockInspection {
            held: i.held,
            remaining_ms: i.remaining_ms.map(|v| v as f64),
            holder: i.holder,
            fence: i.fence.map(|v| v as f64),
        }
    }
}

/// Permits held in a semaphore, as a quorum of nodes counts them: on one node
/// its count; on several nodes (Redlock) the holders that at least a quorum of
/// nodes record, and their permits.
#[napi(object)]
pub struct SemaphoreCount {
    /// Permits held by holders whose lease has not ended.
    pub permits: u32,
    /// How many holders hold them.
    pub holders: u32,
}

impl From<core::engine::semaphore::Count> for SemaphoreCount {
    fn from(c: core::engine::semaphore::Count) -> Self {
        SemaphoreCount {
            permits: c.permits,
            holders: c.holders,
        }
    }
}

/// A node's health as the client sees it (`health()`): down from its first
/// connection failure (a timeout, a refused or broken connection, no master)
/// until it answers again, which the client checks by PINGing it.
#[napi(object)]
pub struct NodeHealth {
    /// `host:port` (or the socket path) of the node, as in `nodes`.
    pub node: String,
    pub up: bool,
    /// When it last went down or came back (ms since the Unix epoch); the
    /// client's creation if neither happened.
    pub since: f64,
    /// While down: its last fault, in words; else null.
    pub error: Either<String, Null>,
    /// While down: its faults since it went down.
    pub faults: f64,
}

impl NodeHealth {
    pub fn new(node: &str, status: core::engine::health::NodeStatus) -> NodeHealth {
        NodeHealth {
            node: node.to_string(),
            up: status.up,
            since: status.since_ms,
            error: status.error.map_or(Either::B(Null), Either::A),
            faults: status.faults as f64,
        }
    }
}

/// The `'reconnected'` event's detail: a node answered again after an outage.
#[napi(object)]
pub struct NodeRecovered {
    /// `host:port` (or the socket path) of the node.
    pub node: String,
    /// How long it was down, in ms (from its first fault to the answer).
    pub down_ms: f64,
    /// Its faults meanwhile, reported as `'error'` events or not.
    pub faults: f64,
}
