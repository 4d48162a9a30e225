//! One client's fast connections on a JS thread: each node's slot, opened
//! on a thread of its own and handed over once ready.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use napi::{sys, Env};
use redis::ConnectionInfo;
use smallvec::SmallVec;

use super::conn::Conn;
use super::reactor::{current, Reactor, REACTOR};
use super::setup::reactor;
use crate::binding::options::PACKED_LEN;
use crate::core::drivers::uvloop;
use crate::core::ops::script_free::Server;
use crate::core::transport::uvloop as transport;
use crate::core::{self as core};

/// How long a node whose fast connection failed to open answers `unreachable`
/// (with why) before an operation tries to open it again.
pub(super) const RETRY_CONNECT: Duration = Duration::from_millis(500);

/// A node's fast connection, as far as it got.
pub(super) enum Slot {
    /// None yet; the next operation may try again from this instant on
    /// (why the last try failed).
    Idle(Option<Instant>, Option<String>),
    /// Opening; what waits for it, and the alarm that keeps the loop alive
    /// meanwhile.
    Connecting(Vec<Opened>, Option<(Instant, u64)>),
    Ready(Rc<Conn>),
}

/// What waits for a connection being opened: called with it, or with why
/// it could not be opened.
pub(super) type Opened = Box<dyn FnOnce(Result<Rc<Conn>, String>)>;

/// Node `i`'s connection as an acquisition finds it.
pub(super) enum Found {
    Ready(Rc<Conn>),
    /// Being opened: what is given to [`FastClient::when_open`] waits for it.
    Opening,
    /// Not open, and not being opened before a while: why.
    Down(String),
}

/// Each node's [`Found`], inline for up to four nodes (no allocation per
/// operation on one node or a small Redlock).
pub(super) type Founds = SmallVec<[Found; 4]>;

/// One client's fast connections on this JS thread.
pub(super) struct FastClient {
    pub(super) key: usize,
    pub(super) infos: Vec<ConnectionInfo>,
    pub(super) connect_timeout: Duration,
    pub(super) slots: Vec<RefCell<Slot>>,
    /// The runtime's own connections (the watchdog's) were asked to open.
    pub(super) warmed: Cell<bool>,
    /// The client, for the JS thread's own calls ([`super::entry`]).
    #[cfg_attr(test, allow(dead_code))]
    pub(super) client: core::Client,
    /// The options of its last such acquire, as JS packed them, resolved:
    /// a caller that passes the same options each time resolves them once.
    #[cfg_attr(test, allow(dead_code))]
    pub(super) last_spec: RefCell<Option<([f64; PACKED_LEN], core::AcquireSpec)>>,
}

impl Drop for FastClient {
    fn drop(&mut self) {
        let mut holds = Vec::new();
        for slot in &self.slots {
            match slot.try_borrow_mut().as_deref_mut() {
                Ok(Slot::Ready(conn)) => conn.retire(),
                // What waited for it is dropped unanswered (its acquisition
                // ended with the client); the process is no longer held for it.
                Ok(Slot::Connecting(_, hold)) => holds.extend(hold.take()),
                _ => {}
            }
        }
        if holds.is_empty() {
            return;
        }
        let r = REACTOR.try_with(|r| r.try_borrow().ok().and_then(|r| r.clone()));
        if let Ok(Some(r)) = r {
            for key in holds {
                r.disarm(key);
            }
        }
    }
}

impl FastClient {
    /// Each node's connection as an acquisition finds it (the missing ones
    /// start connecting); `None` when one owes so many replies that it goes
    /// to the tokio path, which paces its attempts.
    pub(super) fn for_operation(&self, r: &Reactor) -> Option<Founds> {
        let found = self.for_command(r);
        let saturated = found
            .iter()
            .any(|f| matches!(f, Found::Ready(conn) if conn.saturated()));
        (!saturated).then_some(found)
    }

    /// Each node's connection for a release or an extension, however busy:
    /// a command waiting behind the connection's backlog has its bound from
    /// when it is written (see `Wire`), so a burst of 300,000 releases is
    /// one queue on the JS thread's connection rather than as many tasks on
    /// the runtime, where the connection's own reader waited behind them.
    pub(super) fn for_command(&self, r: &Reactor) -> Founds {
        (0..self.slots.len()).map(|i| self.find(r, i)).collect()
    }

    /// Node `i`'s connection: ready, being opened (it starts opening now
    /// unless it failed just now), or down.
    pub(super) fn find(&self, r: &Reactor, i: usize) -> Found {
        let Some(slot) = self.slots.get(i) else {
            return Found::Down("no such node".into());
        };
        let mut slot = slot.borrow_mut();
        if let Slot::Ready(conn) = &*slot {
            if conn.usable() {
                return Found::Ready(conn.clone());
            }
            *slot = Slot::Idle(None, None);
        }
        if let Slot::Idle(after, why) = &*slot {
            if after.is_some_and(|t| Instant::now() < t) {
                let why = why.clone();
                return Found::Down(why.unwrap_or_else(|| "not connected".into()));
            }
            *slot = self.connect(r, i);
        }
        match &*slot {
            Slot::Ready(conn) => Found::Ready(conn.clone()),
            Slot::Connecting(..) => Found::Opening,
            Slot::Idle(_, why) => Found::Down(why.clone().unwrap_or_default()),
        }
    }

    /// `then` runs once node `i`'s connection, being opened, is open or has
    /// failed to; at once when it is not being opened.
    pub(super) fn when_open(&self, r: &Reactor, i: usize, then: Opened) {
        let Some(slot) = self.slots.get(i) else {
            return then(Err("no such node".into()));
        };
        let mut s = slot.borrow_mut();
        match &mut *s {
            Slot::Connecting(waiting, hold) => {
                if hold.is_none() {
                    // A promise waiting on a connection keeps the process alive.
                    let until = Instant::now() + self.connect_timeout + RETRY_CONNECT;
                    *hold = Some(r.alarm(until, Box::new(|| {})));
                }
                waiting.push(then);
            }
            Slot::Ready(conn) => {
                let conn = conn.clone();
                drop(s);
                then(Ok(conn));
            }
            Slot::Idle(_, why) => {
                let why = why.clone().unwrap_or_else(|| "not connected".into());
                drop(s);
                then(Err(why));
            }
        }
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
                let opened = transport::socket::connect(&info, timeout);
                let open = gate.lock().unwrap_or_else(|p| p.into_inner());
                if *open {
                    queue.run(move |env| installed(env, key, i, opened));
                }
            });
        match opening {
            Ok(_) => Slot::Connecting(Vec::new(), None),
            Err(e) => Slot::Idle(Some(Instant::now() + RETRY_CONNECT), Some(e.to_string())),
        }
    }
}

/// On the JS thread: a connection opened (or failed to) for node `i`.
pub(super) fn installed(
    env: sys::napi_env,
    key: usize,
    i: usize,
    opened: std::result::Result<(transport::Socket, Server), String>,
) {
    let Some(r) = current(env) else { return };
    let Some(client) = r.clients.borrow().get(&key).cloned() else {
        return;
    };
    let Some(slot) = client.slots.get(i) else {
        return;
    };
    let conn = opened.and_then(|(sock, server)| {
        Conn::open(&r, sock, server).ok_or_else(|| "its socket could not be polled".to_string())
    });
    let next = match &conn {
        Ok(conn) => Slot::Ready(conn.clone()),
        Err(why) => Slot::Idle(Some(Instant::now() + RETRY_CONNECT), Some(why.clone())),
    };
    let was = std::mem::replace(&mut *slot.borrow_mut(), next);
    // What waited for it goes on now, in the order it came.
    if let Slot::Connecting(waiting, hold) = was {
        if let Some(key) = hold {
            r.disarm(key);
        }
        for then in waiting {
            then(conn.clone());
        }
    }
}

pub(super) fn key_of(client: &core::Client) -> usize {
    Arc::as_ptr(client.inner()) as usize
}

/// What names `client` to the JS thread's own calls (`hotCalls()`).
pub fn hot_key(client: &core::Client) -> f64 {
    key_of(client) as f64
}

/// Sets up the fast path for a new client, when it can take it: false when
/// every operation of this client takes the tokio path.
pub fn register(env: &Env, client: &core::Client) -> bool {
    if uvloop::switched_off() {
        return false;
    }
    let Some(infos) = uvloop::fast_targets(client.inner()) else {
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
            .map(|_| RefCell::new(Slot::Idle(None, None)))
            .collect(),
        infos,
        connect_timeout: client.config().connect_timeout,
        warmed: Cell::new(false),
        client: client.clone(),
        last_spec: RefCell::new(None),
    };
    r.clients.borrow_mut().insert(key, Rc::new(fast));
    true
}

/// Takes client `key`'s connections off this thread; dropped, they close
/// once idle.
fn take(key: usize) -> Option<Rc<FastClient>> {
    REACTOR
        .try_with(|r| {
            let r = r.try_borrow().ok()?;
            let fast = r.as_ref()?.clients.borrow_mut().remove(&key);
            fast
        })
        .ok()
        .flatten()
}

/// The client closed or is gone: its connections close once idle.
pub fn forget(client: &core::Client) {
    drop(take(key_of(client)));
}

/// Its environment ends: no more fast operations, and its acquisitions on
/// this thread go unsettled (nothing may call into JS any more).
pub fn abandon(client: &core::Client) {
    super::waiting::forget_of(key_of(client));
    forget(client);
}

/// `close()` was called: the client's acquisitions on this thread end at once.
pub fn stop_acquiring(client: &core::Client) {
    super::waiting::closing(key_of(client));
}

/// The client closes: no more fast operations.
pub fn retire(client: &core::Client) {
    let key = key_of(client);
    // Its acquisitions end first: an attempt in flight is undone on its connections.
    super::waiting::closing(key);
    let Some(fast) = take(key) else { return };
    // What still waits for a connection being opened (a release, an extend)
    // is answered: the node is unreachable now.
    for slot in &fast.slots {
        let waiting = match slot.try_borrow_mut().as_deref_mut() {
            Ok(Slot::Connecting(waiting, _)) => std::mem::take(waiting),
            _ => Vec::new(),
        };
        napi::bindgen_prelude::within_runtime_if_available(|| {
            for then in waiting {
                then(Err("the client is closed".into()));
            }
        });
    }
}

pub(super) fn lookup(env: &Env, key: usize) -> Option<(Rc<Reactor>, Rc<FastClient>)> {
    let r = current(env.raw())?;
    let fast = r.clients.borrow().get(&key).cloned()?;
    Some((r, fast))
}
