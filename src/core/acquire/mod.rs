//! The engine that takes locks, on tokio: `drive.rs` runs a plain lock's
//! acquisition machine (`ops::acquisition`) from its first attempt to its
//! outcome (as the JS thread's driver, `fast/acquire.rs`, does there); `run.rs` is the acquire loop of the other kinds (attempt →
//! verdict → take, or undo and pause until woken or the wait ends; its
//! decisions after a verdict and its errors are the machine's, in
//! `ops::acquisition`), `attempt.rs` one attempt on every node, `undo.rs` its undo, `permits.rs`
//! and `fair.rs` the semaphore, read-write, slot and fair attempts,
//! `queue.rs` waiting in line for release notices, `register.rs` a won
//! attempt becoming a held lock. What a request, an attempt and a lock kind are lives in `model/`.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::core::error::Result;
use crate::core::lock::Lock;
use crate::core::shared::Inner;

mod attempt;
mod drive;
mod fair;
mod permits;
mod queue;
mod register;
mod run;
mod undo;

// The model's types the fast path still names by their former paths.
pub(crate) use crate::core::model::Request;
pub(crate) use drive::{behind_earlier_callers, drives, plan_of, timer_fired};
pub(crate) use queue::{join, Queued};
pub(crate) use register::register;

/// Takes the lock (or permits) `request` asks for, waiting within its bounds.
pub(crate) async fn acquire(
    inner: &Arc<Inner>,
    request: Request,
    cancel: CancellationToken,
) -> Result<Lock> {
    if drive::drives(inner, &request) {
        return drive::acquire(inner, request, cancel).await;
    }
    run::acquire_from(inner, request, cancel).await
}
