//! How one client's fast connections on a JS thread are made and unmade:
//! the client registered on its thread's reactor, each node's connection
//! opened on a thread of its own and handed over once ready, and, as the
//! client closes or its environment ends, retired and closed. What they do
//! in between is in [`conn`](super::conn).

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::rc::Rc;
use std::time::{Duration, Instant};

use napi::{sys, Env};

use super::conn::{key_of, Conn, FastClient, Opened, Slot};
use super::reactor::data;
use super::reactor::{current, Reactor, REACTOR};
use super::setup::{closed, opened, reactor};
use super::setup::{set_data, uv, Handle};
use crate::core::base::Peak;
use crate::core::drivers::uvloop;
use crate::core::ops::script_free::Server;
use crate::core::transport::uvloop::{self as transport, Wire};
use crate::core::{self as core};

/// How long a node whose fast connection failed to open answers `unreachable`
/// (with why) before an operation tries to open it again.
pub(super) const RETRY_CONNECT: Duration = Duration::from_millis(500);

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
    let Some(infos) = uvloop::fast_targets(&client.inner) else {
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

impl Conn {
    pub(super) fn open(
        r: &Rc<Reactor>,
        sock: transport::Socket,
        server: Server,
    ) -> Option<Rc<Conn>> {
        let handle = unsafe { r.uv.poll(r.uv_loop, sock.raw_fd())? };
        opened();
        let mut wire = Wire::new(sock);
        wire.serves(server);
        let conn = Rc::new(Conn {
            uv: r.uv,
            wire: RefCell::new(wire),
            handle,
            events: Cell::new(0),
            busy: Cell::new(true),
            closed: Cell::new(false),
            retired: Cell::new(false),
            corked: Cell::new(false),
            peak: Cell::new(Peak::default()),
        });
        // The handle owns one reference, given back in `on_close`.
        unsafe { set_data(handle, Rc::into_raw(conn.clone()) as *mut c_void) };
        r.conns.borrow_mut().push(Rc::downgrade(&conn));
        conn.update();
        (!conn.closed.get()).then_some(conn)
    }

    pub(super) fn retire(&self) {
        self.retired.set(true);
        self.update();
    }

    /// The environment is gone: nobody is answered any more. Dropping what was
    /// owed also drops the operations' hold on this connection.
    pub(super) fn abandon(&self) {
        let owed = match self.wire.try_borrow_mut() {
            Ok(mut w) => w.abandon(),
            Err(_) => Vec::new(),
        };
        drop(owed);
    }

    pub(super) fn close(&self) {
        if self.closed.replace(true) {
            return;
        }
        unsafe { self.uv.close(self.handle, on_close) };
    }
}

unsafe extern "C" fn on_close(handle: Handle) {
    let raw = data(handle) as *const Conn;
    let uv = if raw.is_null() {
        uv()
    } else {
        let conn = Rc::from_raw(raw);
        Some(conn.uv)
    };
    if let Some(uv) = uv {
        uv.free_poll(handle);
    }
    closed();
}
