//! What JS reads of a held lock, by its id: all at once (`lockView`), or one
//! property at a time; plain reads of its state, no Redis call.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::binding::errors::ErrorObject;
use crate::binding::events::NodeReport;
use crate::binding::lock::with_lock;
use crate::core::engine::lock::Status as LockStatus;
use crate::core::Lock;

/// A lock as JS reads it, all at once (`Lock`'s getters are one call each).
#[napi(object, use_nullable = true)]
pub struct LockView {
    /// The lock's first key, as given (without the client's `keyPrefix`).
    pub key: String,
    /// Every key this lock holds, as given (without the client's `keyPrefix`).
    pub keys: Vec<String>,
    /// The random value (UUID v4) stored under the key; it proves ownership on
    /// release and renewal.
    pub token: String,
    /// Milliseconds of validity left by the local monotonic clock (ttl − elapsed −
    /// drift since the last successful renewal); 0 once released, lost or expired.
    /// Synchronous: no Redis call.
    pub remaining: f64,
    /// True while the lock is held and within its validity.
    pub held: bool,
    /// The lease length in ms that renewals restore.
    pub ttl: f64,
    /// How many attempts the acquisition took.
    pub attempts: u32,
    /// The fencing token of this acquisition (client option `fencing`), or null:
    /// strictly larger for every later holder of the key, for as long as the node
    /// keeps its acknowledged writes. Send it with writes and let the resource
    /// refuse older ones.
    pub fence: Option<f64>,
    /// How many replicas acknowledged the last acquisition or manual extension
    /// (option `waitReplicas`), or null when not asked for or when `WAIT` failed.
    pub replicas: Option<u32>,
    /// Each node's answer to the lock's last acquisition, extension or release
    /// (`pending` for a node that had not answered yet; final once the
    /// client's `settled()` resolved).
    pub nodes: Vec<NodeReport>,
}

/// The lock `id` as JS reads it (see `LockView`).
#[napi]
pub fn lock_view(id: f64) -> Result<LockView> {
    with_lock(id, |lock| LockView {
        key: lock.name().to_string(),
        keys: lock.names(),
        token: lock.token().to_string(),
        remaining: millis(lock.remaining()),
        held: lock.is_held(),
        ttl: lock.ttl().as_millis() as f64,
        attempts: lock.attempts(),
        fence: lock.fence().map(|f| f as f64),
        replicas: lock.replicas(),
        nodes: nodes_of(lock),
    })
}

pub(super) fn millis(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn nodes_of(lock: &Lock) -> Vec<NodeReport> {
    lock.nodes()
        .iter()
        .map(|n| NodeReport::new(&n.node, &n.answer))
        .collect()
}

/// The lock's first key (see `LockView.key`).
#[napi]
pub fn lock_key(id: f64) -> Result<String> {
    with_lock(id, |lock| lock.name().to_string())
}

/// Every key of the lock (see `LockView.keys`).
#[napi]
pub fn lock_keys(id: f64) -> Result<Vec<String>> {
    with_lock(id, Lock::names)
}

/// The lock's token (see `LockView.token`).
#[napi]
pub fn lock_token(id: f64) -> Result<String> {
    with_lock(id, |lock| lock.token().to_string())
}

/// Validity left in ms (see `LockView.remaining`).
#[napi]
pub fn lock_remaining(id: f64) -> Result<f64> {
    with_lock(id, |lock| millis(lock.remaining()))
}

/// Held and valid (see `LockView.held`).
#[napi]
pub fn lock_held(id: f64) -> Result<bool> {
    with_lock(id, Lock::is_held)
}

/// Each node's last answer (see `LockView.nodes`).
#[napi]
pub fn lock_nodes(id: f64) -> Result<Vec<NodeReport>> {
    with_lock(id, nodes_of)
}

/// `'held'`, `'released'`, `'lost'` (also once its validity ran out
/// before the watchdog recorded the loss: its holder counts it as lost
/// from that instant; and when a release found its key gone or another
/// owner's) or `'handed-over'`.
#[napi]
pub fn lock_status(id: f64) -> Result<&'static str> {
    with_lock(id, |lock| match lock.status() {
        LockStatus::Held if lock.is_held() => "held",
        LockStatus::Held | LockStatus::Lost => "lost",
        LockStatus::Released => "released",
        LockStatus::HandedOver => "handed-over",
    })
}

/// True once the lock ended: released, handed over, or lost with the
/// loss recorded (by the watchdog, or by a release that found it).
/// False while held, also once its validity ran out unrecorded.
#[napi]
pub fn lock_ended(id: f64) -> Result<bool> {
    with_lock(id, |lock| lock.status() != LockStatus::Held)
}

/// The lease length in ms (see `LockView.ttl`).
#[napi]
pub fn lock_ttl(id: f64) -> Result<f64> {
    with_lock(id, |lock| lock.ttl().as_millis() as f64)
}

/// The fencing token, or null (see `LockView.fence`).
#[napi]
pub fn lock_fence(id: f64) -> Result<Option<f64>> {
    with_lock(id, |lock| lock.fence().map(|f| f as f64))
}

/// Replicas that acknowledged, or null (see `LockView.replicas`).
#[napi]
pub fn lock_replicas(id: f64) -> Result<Option<u32>> {
    with_lock(id, Lock::replicas)
}

/// Attempts the acquisition took.
#[napi]
pub fn lock_attempts(id: f64) -> Result<u32> {
    with_lock(id, Lock::attempts)
}

/// Why the lock was lost (also once its validity ran out before the
/// watchdog recorded it): a new `LockError` (`ERR_LOCK_LOST`) at each
/// read, or null.
#[napi(ts_return_type = "Error | null")]
pub fn lock_loss(id: f64) -> Result<Option<ErrorObject>> {
    with_lock(id, |lock| lock.loss_now().map(ErrorObject))
}

/// What ended the lock before its holder let go, once recorded: its loss
/// (`ERR_LOCK_LOST`) or its client's close (`ERR_LOCK_CLOSED`); a new
/// `LockError` at each read, or null (also while only the clock tells
/// that its validity ran out: see `lockLoss`).
#[napi(ts_return_type = "Error | null")]
pub fn lock_ending(id: f64) -> Result<Option<ErrorObject>> {
    with_lock(id, |lock| lock.ending().map(ErrorObject))
}
