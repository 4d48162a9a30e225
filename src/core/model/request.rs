//! An acquisition as data: the checked [`Request`].

use super::Permits;
use crate::core::config::AcquireSpec;
use crate::core::waiters::Arrival;

/// A checked acquisition, ready to send.
pub struct Request {
    pub(crate) names: Vec<String>,
    pub(crate) spec: AcquireSpec,
    /// Permits of a semaphore rather than a lock.
    pub(crate) permits: Option<Permits>,
    /// The caller's place among this client's callers of the key (a plain
    /// lock on one key): its first attempt goes after theirs were answered.
    pub(crate) arrival: Option<Arrival>,
}

impl Request {
    /// The resolved options.
    pub fn spec(&self) -> &AcquireSpec {
        &self.spec
    }
}
