//! The engine that takes locks on tokio: `drive.rs` runs an acquisition
//! machine (`ops::acquisition`, every kind of lock) from its turn to its
//! outcome, as the JS thread's driver (`uvloop/acquire.rs`) does there;
//! `plan.rs` is what the machine is given for a request, `queue.rs` waiting
//! in line for release notices, `register.rs` a won attempt becoming a held
//! lock. What a request and a lock kind are lives in `model/`.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::core::error::Result;
use crate::core::lock::Lock;
use crate::core::shared::Inner;

mod drive;
mod plan;
mod queue;
mod register;

// The model's types the fast path still names by their former paths.
pub(crate) use crate::core::model::Request;
pub(crate) use plan::plan_of;
pub(crate) use queue::{behind_earlier_callers, timer_fired, woke};
pub(crate) use queue::{join, Queued};
pub(crate) use register::register;

/// Takes the lock (or permits) `request` asks for, waiting within its bounds.
pub(crate) async fn acquire(
    inner: &Arc<Inner>,
    request: Request,
    cancel: CancellationToken,
) -> Result<Lock> {
    drive::acquire(inner, request, cancel).await
}
