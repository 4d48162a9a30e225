//! The requests of the other kinds of lock, checked without I/O:
//! semaphores (permits of a limit), read-write locks, and fair locks and
//! semaphores served in arrival order across processes. Each is a lock's
//! request ([`Client::prepare`]) with the permits of its kind.

use super::Client;
use crate::core::config::AcquireOptions;
use crate::core::engine::acquire::Request;
use crate::core::error::{LockError, Result};
use crate::core::model;

impl Client {
    /// Checks a semaphore acquisition (`permits` of `limit` on one key)
    /// without I/O; [`Client::acquire_prepared`] then takes the permits.
    pub fn prepare_permits(
        &self,
        name: String,
        limit: u32,
        permits: u32,
        opts: &AcquireOptions,
    ) -> Result<Request> {
        let mut permits = model::check_permits(limit, permits)?;
        if self.inner.nodes.len() > 1 {
            // Holders each on a different majority could exceed a count kept per
            // node: on several nodes permits are numbered slots, each a mutex.
            permits.kind = model::Kind::Slots;
        }
        let mut request = self.prepare(vec![name], opts)?;
        request.permits = Some(permits);
        Ok(request)
    }

    /// Checks a read-write lock acquisition (a reader, or with `write` the
    /// writer) without I/O; [`Client::acquire_prepared`] then takes it.
    pub fn prepare_rw(&self, name: String, write: bool, opts: &AcquireOptions) -> Result<Request> {
        let mut request = self.prepare(vec![name], opts)?;
        request.permits = Some(model::rw_permits(write));
        Ok(request)
    }

    /// Checks a fair lock acquisition without I/O: waiters of `name` across
    /// every process are served in arrival order through a line kept in Redis.
    /// One key, one node or a cluster (not Redlock, whose attempts change tokens).
    pub fn prepare_fair(&self, name: String, opts: &AcquireOptions) -> Result<Request> {
        if self.inner.nodes.len() > 1 {
            return Err(LockError::invalid_value(
                "fair",
                "is not supported with several nodes (Redlock)",
            ));
        }
        let mut request = self.prepare(vec![name], opts)?;
        request.permits = Some(model::fair_permits());
        Ok(request)
    }

    /// [`Client::prepare_permits`], served in arrival order across processes
    /// like [`Client::prepare_fair`]: the permits are taken only when they fit
    /// beside those of every earlier waiter.
    pub fn prepare_fair_permits(
        &self,
        name: String,
        limit: u32,
        permits: u32,
        opts: &AcquireOptions,
    ) -> Result<Request> {
        let request = self.prepare_fair(name.clone(), opts)?;
        let p = self.prepare_permits(name, limit, permits, opts)?.permits;
        Ok(Request {
            permits: p.map(model::fair),
            ..request
        })
    }

    /// [`Client::prepare_rw`], served in arrival order across processes:
    /// readers at the head of the line enter together, a writer alone.
    pub fn prepare_fair_rw(
        &self,
        name: String,
        write: bool,
        opts: &AcquireOptions,
    ) -> Result<Request> {
        let request = self.prepare_fair(name, opts)?;
        Ok(Request {
            permits: Some(model::fair(model::rw_permits(write))),
            ..request
        })
    }
}
