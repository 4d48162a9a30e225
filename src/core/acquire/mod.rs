//! The engine that takes locks, on tokio: `run.rs` is the acquire loop
//! (attempt → verdict → take, or undo and pause until woken or the wait
//! ends; its decisions after a verdict and its errors are the acquisition
//! machine's, in `ops::acquisition`), `attempt.rs` one attempt on every node, `undo.rs` its undo
//! (done here, or already sent by the fast path that made it), `permits.rs`
//! and `fair.rs` the semaphore, read-write, slot and fair attempts,
//! `queue.rs` waiting in line for release notices, `register.rs` a won
//! attempt becoming a held lock. What a request, an attempt and a lock kind are lives in `model/`.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::core::error::Result;
use crate::core::lock::Lock;
use crate::core::shared::Inner;

mod attempt;
mod fair;
mod permits;
mod queue;
mod register;
mod run;
mod undo;

// The model's types the fast path still names by their former paths.
pub(crate) use crate::core::model::{Attempt, Judged, Request, Resume, SentUndo, Won};

/// Takes the lock (or permits) `request` asks for, waiting within its bounds.
pub(crate) async fn acquire(
    inner: &Arc<Inner>,
    request: Request,
    cancel: CancellationToken,
) -> Result<Lock> {
    run::acquire_from(inner, request, cancel, None).await
}

/// Goes on with an acquisition whose first attempt (and token) came from
/// elsewhere, judged and undone there.
pub(crate) async fn acquire_resumed(
    inner: &Arc<Inner>,
    resume: Resume,
    cancel: CancellationToken,
) -> Result<Lock> {
    let Resume {
        request,
        token,
        attempt,
        judged,
    } = resume;
    run::acquire_from(inner, request, cancel, Some((token, attempt, judged))).await
}
