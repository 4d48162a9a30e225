use napi_derive::napi;
use tokio_util::sync::CancellationToken;

/// Cancels a pending `acquire` (the JS layer links it to an `AbortSignal`).
#[napi]
#[derive(Default)]
pub struct CancelHandle {
    pub(crate) token: CancellationToken,
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
    }
}
