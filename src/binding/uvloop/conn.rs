//! One client's fast connections on a JS thread at work: each node's slot
//! as an operation finds it ([`FastClient`]: ready, being opened, or down),
//! and each connection's [`Wire`] with the libuv poll handle that drives it
//! ([`Conn`]). How they are made and unmade (a client registered, a
//! connection opened on a thread of its own and handed over, retired and
//! closed) is in [`clients`](super::clients).

use std::cell::{Cell, RefCell};
use std::ffi::c_int;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use napi::Env;
use redis::ConnectionInfo;
use smallvec::SmallVec;

use super::reactor::data;
use super::reactor::{current, deliver, done_list, Reactor, REACTOR};
use super::setup::{Handle, Uv, DISCONNECT, READABLE, WRITABLE};
use crate::binding::options::PACKED_LEN;
use crate::core::base::Peak;
use crate::core::drivers::uvloop;
use crate::core::error::NodeAnswer;
use crate::core::transport::uvloop::{Done, OnReply, Wire};
use crate::core::{self as core};

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
}

pub(super) fn key_of(client: &core::Client) -> usize {
    Arc::as_ptr(&client.inner) as usize
}

pub(super) fn lookup(env: &Env, key: usize) -> Option<(Rc<Reactor>, Rc<FastClient>)> {
    let r = current(env.raw())?;
    let fast = r.clients.borrow().get(&key).cloned()?;
    Some((r, fast))
}

/// Replies a fast connection may owe before new acquisitions take the tokio
/// path, which paces their attempts (releases and extensions stay here: their
/// bounds run from their writes).
pub(super) const MAX_IN_FLIGHT: usize = 8_192;

/// One fast connection and its poll handle.
pub(super) struct Conn {
    pub(super) uv: &'static Uv,
    pub(super) wire: RefCell<Wire>,
    pub(super) handle: Handle,
    pub(super) events: Cell<c_int>,
    /// The handle keeps the loop alive (replies are owed).
    pub(super) busy: Cell<bool>,
    pub(super) closed: Cell<bool>,
    /// Its client closed: it closes once no reply is owed.
    pub(super) retired: Cell<bool>,
    /// On the reactor's list of connections to write before the loop waits.
    pub(super) corked: Cell<bool>,
    /// The most replies owed at once since the last burst drained.
    pub(super) peak: Cell<Peak>,
}

impl Conn {
    pub(super) fn usable(&self) -> bool {
        !self.closed.get()
            && !self.retired.get()
            && self.wire.try_borrow().is_ok_and(|w| !w.is_broken())
    }

    /// So many replies owed that a new acquisition takes the other path.
    pub(super) fn saturated(&self) -> bool {
        self.wire
            .try_borrow()
            .is_ok_and(|w| w.in_flight() >= MAX_IN_FLIGHT)
    }

    /// Sends `cmd`: packed now, written with the rest of this turn's commands
    /// before the loop next waits (the reactor's prepare step).
    pub(super) fn send(self: &Rc<Self>, cmd: uvloop::Packed, deadline: Instant, on_reply: OnReply) {
        let mut done = Done::new();
        let unsent = match self.wire.try_borrow_mut() {
            Ok(mut w) => {
                w.send_script(cmd, deadline, on_reply, &mut done);
                w.has_unsent()
            }
            Err(_) => {
                done.push((
                    on_reply,
                    Err(NodeAnswer::Unreachable("the connection is busy".into())),
                ));
                false
            }
        };
        if unsent && !self.corked.replace(true) {
            let _ = REACTOR.try_with(|r| {
                if let Some(r) = r.borrow().as_ref() {
                    r.corked.borrow_mut().push(self.clone());
                }
            });
        }
        deliver(done);
        self.update();
    }

    /// Polls for what the connection needs now; closes it once it is done.
    pub(super) fn update(&self) {
        if self.closed.get() {
            return;
        }
        let Ok(w) = self.wire.try_borrow() else {
            return;
        };
        if w.is_broken() || (self.retired.get() && !w.is_waited()) {
            drop(w);
            self.close();
            return;
        }
        // Readable even when idle (unreferenced): a cut is seen before the next use.
        let want = READABLE | DISCONNECT | if w.wants_write() { WRITABLE } else { 0 };
        // Replies given up on do not hold the process.
        let busy = w.is_waited();
        let mut peak = self.peak.get();
        peak.track(w.in_flight());
        self.peak.set(peak);
        drop(w);
        unsafe {
            if want != self.events.get() {
                if !self.uv.poll_start(self.handle, want, on_poll) {
                    self.close();
                    return;
                }
                self.events.set(want);
            }
            if busy != self.busy.get() {
                self.uv.set_ref(self.handle, busy);
                self.busy.set(busy);
            }
        }
    }
}

unsafe extern "C" fn on_poll(handle: Handle, status: c_int, events: c_int) {
    let raw = data(handle) as *const Conn;
    if raw.is_null() {
        return;
    }
    Rc::increment_strong_count(raw);
    let conn = Rc::from_raw(raw);
    let Some(r) = REACTOR.try_with(|r| r.borrow().clone()).ok().flatten() else {
        return;
    };
    r.in_scope(|| {
        let mut done = done_list();
        if let Ok(mut w) = conn.wire.try_borrow_mut() {
            if status < 0 {
                w.fail(
                    NodeAnswer::Unreachable(format!("poll error {status}").into()),
                    &mut done,
                );
            } else {
                if events & WRITABLE != 0 {
                    w.on_writable(&mut done);
                }
                if events & (READABLE | DISCONNECT) != 0 {
                    w.on_readable(&mut done);
                }
            }
        }
        deliver(done);
        conn.update();
    });
}
