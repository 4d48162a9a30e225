//! One fast connection on the JS thread: its [`Wire`] and the libuv poll
//! handle that drives it.

use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void};
use std::rc::Rc;
use std::time::Instant;

use super::reactor::{deliver, done_list, Reactor, REACTOR};
use super::setup::{closed, opened};
use super::uv::{self, Handle, Uv};
use crate::core::drivers::uvloop;
use crate::core::error::NodeAnswer;
use crate::core::memory::Peak;
use crate::core::ops::script_free::Server;
use crate::core::transport::uvloop::{self as transport, Done, OnReply, Wire};

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
        unsafe { uv::set_data(handle, Rc::into_raw(conn.clone()) as *mut c_void) };
        r.conns.borrow_mut().push(Rc::downgrade(&conn));
        conn.update();
        (!conn.closed.get()).then_some(conn)
    }

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
        let want = uv::READABLE | uv::DISCONNECT | if w.wants_write() { uv::WRITABLE } else { 0 };
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

unsafe extern "C" fn on_poll(handle: Handle, status: c_int, events: c_int) {
    let raw = uv::data(handle) as *const Conn;
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
                if events & uv::WRITABLE != 0 {
                    w.on_writable(&mut done);
                }
                if events & (uv::READABLE | uv::DISCONNECT) != 0 {
                    w.on_readable(&mut done);
                }
            }
        }
        deliver(done);
        conn.update();
    });
}

unsafe extern "C" fn on_close(handle: Handle) {
    let raw = uv::data(handle) as *const Conn;
    let uv = if raw.is_null() {
        uv::uv()
    } else {
        let conn = Rc::from_raw(raw);
        Some(conn.uv)
    };
    if let Some(uv) = uv {
        uv.free_poll(handle);
    }
    closed();
}
