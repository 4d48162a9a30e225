use std::cell::RefCell;
use std::rc::Weak;

use napi_derive::napi;
use tokio_util::sync::CancellationToken;

/// Cancels a pending `acquire` (the JS layer links it to an `AbortSignal`).
#[napi]
#[derive(Default)]
pub struct CancelHandle {
    pub(crate) token: CancellationToken,
    /// The acquisitions driven on this JS thread that it cancels, told at once.
    on_js: RefCell<Vec<Weak<dyn Fn()>>>,
}

#[napi]
impl CancelHandle {
    #[napi(constructor)]
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops the acquisition at its next wait; nothing it took is left behind.
    #[napi]
    pub fn cancel(&self) {
        self.token.cancel();
        let told = std::mem::take(&mut *self.on_js.borrow_mut());
        for tell in told.iter().filter_map(Weak::upgrade) {
            tell();
        }
    }
}

impl CancelHandle {
    /// `tell` runs on this thread when the handle is cancelled (while the
    /// acquisition keeps it alive).
    pub(crate) fn on_cancel(&self, tell: Weak<dyn Fn()>) {
        self.on_js.borrow_mut().push(tell);
    }
}
