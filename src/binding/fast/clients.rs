//! One client's fast connections on a JS thread: each node's slot, opened
//! on a thread of its own and handed over once ready.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use napi::{sys, Env};
use redis::ConnectionInfo;

use super::conn::Conn;
use super::reactor::{current, reactor, Reactor, REACTOR};
use crate::core::{self as core, fast};

/// How long a node whose fast connection failed to open stays on tokio.
pub(super) const RETRY_CONNECT: Duration = Duration::from_millis(500);

/// A node's fast connection, as far as it got.
pub(super) enum Slot {
    /// None yet; the next operation may try again from this instant on.
    Idle(Option<Instant>),
    Connecting,
    Ready(Rc<Conn>),
}

/// One client's fast connections on this JS thread.
pub(super) struct FastClient {
    pub(super) key: usize,
    pub(super) infos: Vec<ConnectionInfo>,
    pub(super) connect_timeout: Duration,
    pub(super) slots: Vec<RefCell<Slot>>,
}

impl Drop for FastClient {
    fn drop(&mut self) {
        for slot in &self.slots {
            if let Ok(Slot::Ready(conn)) = slot.try_borrow().as_deref() {
                conn.retire();
            }
        }
    }
}

impl FastClient {
    /// Every node's connection, when all are ready; otherwise the missing
    /// ones start connecting and this operation takes the tokio path.
    pub(super) fn ready(&self, r: &Reactor) -> Option<Vec<Rc<Conn>>> {
        let mut conns = Vec::with_capacity(self.slots.len());
        let mut saturated = false;
        for (i, slot) in self.slots.iter().enumerate() {
            let mut slot = slot.borrow_mut();
            if let Slot::Ready(conn) = &*slot {
                if conn.usable() {
                    saturated |= conn.saturated();
                    conns.push(conn.clone());
                    continue;
                }
                *slot = Slot::Idle(None);
            }
            if let Slot::Idle(after) = &*slot {
                if after.is_none_or(|t| Instant::now() >= t) {
                    *slot = self.connect(r, i);
                }
            }
        }
        (!saturated && conns.len() == self.slots.len()).then_some(conns)
    }

    /// Node `i`'s connection if it is ready; otherwise it starts connecting
    /// (unless it is, or failed just now) and there is none for now.
    pub(super) fn conn(&self, r: &Reactor, i: usize) -> Option<Rc<Conn>> {
        let mut slot = self.slots.get(i)?.borrow_mut();
        if let Slot::Ready(conn) = &*slot {
            if conn.usable() {
                return Some(conn.clone());
            }
            *slot = Slot::Idle(None);
        }
        if let Slot::Idle(after) = &*slot {
            if after.is_none_or(|t| Instant::now() >= t) {
                *slot = self.connect(r, i);
            }
        }
        None
    }

    /// Opens node `i`'s connection on a thread of its own; the JS thread
    /// takes it over when done.
    pub(super) fn connect(&self, r: &Reactor, i: usize) -> Slot {
        let info = self.infos[i].clone();
        let timeout = self.connect_timeout;
        let key = self.key;
        let queue = r.queue.clone();
        let gate = r.gate.clone();
        let opening = std::thread::Builder::new()
            .name("lockdog-connect".into())
            .spawn(move || {
                let opened = fast::socket::connect(&info, timeout);
                let open = gate.lock().unwrap_or_else(|p| p.into_inner());
                if *open {
                    queue.run(move |env| installed(env, key, i, opened));
                }
            });
        match opening {
            Ok(_) => Slot::Connecting,
            Err(_) => Slot::Idle(Some(Instant::now() + RETRY_CONNECT)),
        }
    }
}

/// On the JS thread: a connection opened (or failed to) for node `i`.
pub(super) fn installed(
    env: sys::napi_env,
    key: usize,
    i: usize,
    opened: std::result::Result<fast::Socket, String>,
) {
    let Some(r) = current(env) else { return };
    let Some(client) = r.clients.borrow().get(&key).cloned() else {
        return;
    };
    let Some(slot) = client.slots.get(i) else {
        return;
    };
    let conn = opened.ok().and_then(|sock| Conn::open(&r, sock));
    *slot.borrow_mut() = match conn {
        Some(conn) => Slot::Ready(conn),
        None => Slot::Idle(Some(Instant::now() + RETRY_CONNECT)),
    };
}

pub(super) fn key_of(client: &core::Client) -> usize {
    Arc::as_ptr(client.inner()) as usize
}

/// Sets up the fast path for a new client, when it can take it: false when
/// every operation of this client takes the tokio path.
pub fn register(env: &Env, client: &core::Client) -> bool {
    if fast::switched_off() {
        return false;
    }
    let Some(infos) = fast::fast_targets(client) else {
        return false;
    };
    let Some(r) = reactor(env.raw()) else {
        return false;
    };
    let key = key_of(client);
    let fast = FastClient {
        key,
        slots: infos
            .iter()
            .map(|_| RefCell::new(Slot::Idle(None)))
            .collect(),
        infos,
        connect_timeout: client.config().connect_timeout,
    };
    r.clients.borrow_mut().insert(key, Rc::new(fast));
    true
}

/// The client closed or is gone: its connections close once idle.
pub fn forget(client: &core::Client) {
    let key = key_of(client);
    let _ = REACTOR.try_with(|r| {
        let fast = r
            .try_borrow()
            .ok()
            .and_then(|r| r.as_ref().and_then(|r| r.clients.borrow_mut().remove(&key)));
        drop(fast);
    });
}

/// Its environment ends: no more fast operations, and its acquisitions on
/// this thread go unsettled (nothing may call into JS any more).
pub fn abandon(client: &core::Client) {
    super::acquire::forget_of(key_of(client));
    forget(client);
}

/// The client closes: no more fast operations.
pub fn retire(client: &core::Client) {
    // Its acquisitions end first: an attempt in flight is undone on its connections.
    super::acquire::closing(key_of(client));
    forget(client);
}

pub(super) fn lookup(env: &Env, key: usize) -> Option<(Rc<Reactor>, Rc<FastClient>)> {
    let r = current(env.raw())?;
    let fast = r.clients.borrow().get(&key).cloned()?;
    Some((r, fast))
}
