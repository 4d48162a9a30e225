//! One JS thread's reactor: its libuv loop, the deadline timer, the fast
//! connections and clients of that thread (made, and closed before the
//! environment goes, in [`setup`](super::setup)), and what they call of
//! libuv as they run.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::rc::{Rc, Weak};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use napi::bindgen_prelude::{within_runtime_if_available, FromNapiValue};
use napi::{sys, JsError, Status};

use super::conn::Conn;
use super::conn::FastClient;
use super::setup::{Handle, PollCb, TimerCb, Uv};
use crate::binding::errors::to_napi;
use crate::binding::lock::ById;
use crate::binding::settle::JsQueue;
use crate::core::transport::uvloop::Done;
use crate::core::LockError;

/// One JS thread's loop, its deadline timer and its clients' fast state.
pub(super) struct Reactor {
    pub(super) env: sys::napi_env,
    pub(super) uv: &'static Uv,
    pub(super) uv_loop: *mut c_void,
    pub(super) timer: Handle,
    pub(super) timer_at: Cell<Option<Instant>>,
    /// Runs before each wait of the loop: writes what was corked.
    pub(super) prepare: Handle,
    /// Connections with commands packed since the loop last waited.
    pub(super) corked: RefCell<Vec<Rc<Conn>>>,
    pub(super) conns: RefCell<Vec<Weak<Conn>>>,
    pub(super) clients: RefCell<HashMap<usize, Rc<FastClient>, ById>>,
    pub(super) resource: sys::napi_ref,
    pub(super) context: sys::napi_async_context,
    pub(super) queue: JsQueue,
    /// Open while the environment lives: connect threads hand their result
    /// over only through an open gate (the queue dies with the environment).
    pub(super) gate: Arc<Mutex<bool>>,
    /// Callbacks due at an instant (an acquisition's `poll_timeout`), by id;
    /// the same deadline timer fires them, and keeps the loop alive while
    /// any is set (an acquisition pausing waits for it).
    pub(super) alarms: RefCell<Alarms>,
    /// Whether the timer keeps the loop alive now.
    pub(super) timer_held: Cell<bool>,
}

/// One-shot callbacks at instants, kept in order of when they are due.
#[derive(Default)]
pub(super) struct Alarms {
    next_id: u64,
    due: BTreeMap<(Instant, u64), Box<dyn FnOnce()>>,
}

impl Alarms {
    /// The callbacks due by `now`, taken out.
    fn take_due(&mut self, now: Instant) -> Vec<Box<dyn FnOnce()>> {
        let later = self.due.split_off(&(now, u64::MAX));
        std::mem::replace(&mut self.due, later)
            .into_values()
            .collect()
    }

    fn earliest(&self) -> Option<Instant> {
        self.due.keys().next().map(|(at, _)| *at)
    }
}

thread_local! {
    pub(super) static REACTOR: RefCell<Option<Rc<Reactor>>> = const { RefCell::new(None) };
}

pub(super) fn ok(status: sys::napi_status) -> Option<()> {
    (status == sys::Status::napi_ok).then_some(())
}

/// This JS thread's reactor, if it has one.
pub(super) fn current(env: sys::napi_env) -> Option<Rc<Reactor>> {
    REACTOR
        .try_with(|r| r.borrow().clone())
        .ok()
        .flatten()
        .filter(|r| r.env == env)
}

/// Before the loop waits: what this turn of the JS thread sent goes out, one
/// write per connection (a burst past `EARLY_WRITE` went already).
pub(super) unsafe extern "C" fn on_prepare(_: Handle) {
    let Some(r) = REACTOR.try_with(|r| r.borrow().clone()).ok().flatten() else {
        return;
    };
    let mut failed = Vec::new();
    loop {
        let Some(conn) = r.corked.borrow_mut().pop() else {
            break;
        };
        conn.corked.set(false);
        if conn.closed.get() {
            continue;
        }
        let mut done = Done::new();
        if let Ok(mut w) = conn.wire.try_borrow_mut() {
            w.write_out(&mut done);
        }
        if done.is_empty() {
            conn.update();
        } else {
            failed.push((conn, done));
        }
    }
    if !failed.is_empty() {
        // A write that failed answers what it carried (the node is cut).
        r.in_scope(|| {
            for (conn, done) in failed {
                deliver(done);
                conn.update();
            }
        });
    }
}

impl Reactor {
    /// Runs `f` as a callback into JS would: a handle scope, the runtime
    /// entered (the core may start tasks), and the microtasks that settled
    /// promises queued run when it ends.
    pub(super) fn in_scope(&self, f: impl FnOnce()) {
        let env = self.env;
        unsafe {
            let mut handles = ptr::null_mut();
            let handles_open = ok(sys::napi_open_handle_scope(env, &mut handles)).is_some();
            let mut resource = ptr::null_mut();
            let mut scope = ptr::null_mut();
            let scope_open = ok(sys::napi_get_reference_value(
                env,
                self.resource,
                &mut resource,
            ))
            .and_then(|_| {
                ok(sys::napi_open_callback_scope(
                    env,
                    resource,
                    self.context,
                    &mut scope,
                ))
            })
            .is_some();
            within_runtime_if_available(f);
            if scope_open {
                sys::napi_close_callback_scope(env, scope);
            }
            if handles_open {
                sys::napi_close_handle_scope(env, handles);
            }
        }
    }

    /// Makes the timer fire by `at` (a reply's deadline). O(1) per command:
    /// the sweep finds what is due and re-arms for the earliest left.
    pub(super) fn arm_for(&self, at: Instant) {
        if self.timer_at.get().is_some_and(|t| t <= at) {
            return;
        }
        self.timer_at.set(Some(at));
        let ms = at.saturating_duration_since(Instant::now()).as_millis() as u64 + 1;
        unsafe { self.uv.timer_start(self.timer, on_timer, ms) };
    }

    /// Runs `f` on this thread at `at` (or as soon after as the loop is
    /// free); the id cancels it ([`Reactor::disarm`]).
    pub(super) fn alarm(&self, at: Instant, f: Box<dyn FnOnce()>) -> (Instant, u64) {
        let key = {
            let mut alarms = self.alarms.borrow_mut();
            alarms.next_id += 1;
            let key = (at, alarms.next_id);
            alarms.due.insert(key, f);
            key
        };
        self.arm_for(at);
        self.hold_loop();
        key
    }

    /// Cancels an alarm that has not run (what it holds is dropped).
    pub(super) fn disarm(&self, key: (Instant, u64)) {
        let f = self.alarms.borrow_mut().due.remove(&key);
        self.hold_loop();
        drop(f);
    }

    /// The timer keeps the loop alive while an alarm is set: a promise
    /// waiting on one must not be left behind by an exiting process.
    fn hold_loop(&self) {
        let held = !self.alarms.borrow().due.is_empty();
        if self.timer_held.replace(held) != held {
            unsafe { self.uv.set_ref(self.timer, held) };
        }
    }

    /// The earliest deadline of any reply owed or alarm due (dropping closed connections).
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        let mut next: Option<Instant> = self.alarms.borrow().earliest();
        self.conns.borrow_mut().retain(|c| match c.upgrade() {
            Some(c) if !c.closed.get() => {
                if let Some(d) = c.wire.try_borrow().ok().and_then(|w| w.next_deadline()) {
                    next = Some(next.map_or(d, |n| n.min(d)));
                }
                true
            }
            _ => false,
        });
        next
    }
}

/// The deadline sweep: a command past its deadline is answered with a timeout.
unsafe extern "C" fn on_timer(_: Handle) {
    let Some(r) = REACTOR.try_with(|r| r.borrow().clone()).ok().flatten() else {
        return;
    };
    r.timer_at.set(None);
    r.in_scope(|| {
        let now = Instant::now();
        let conns: Vec<Rc<Conn>> = r.conns.borrow().iter().filter_map(Weak::upgrade).collect();
        for conn in conns {
            let mut done = Done::new();
            if let Ok(mut w) = conn.wire.try_borrow_mut() {
                // Replies that came while the loop was busy count: read them first.
                if !w.is_idle() {
                    w.on_readable(&mut done);
                }
                w.expire(now, &mut done);
            }
            deliver(done);
            conn.update();
        }
        let due = r.alarms.borrow_mut().take_due(now);
        for f in due {
            f();
        }
        r.hold_loop();
    });
    if let Some(at) = r.next_deadline() {
        r.arm_for(at);
    }
}

pub(super) fn deliver(mut done: Done) {
    for (on_reply, reply) in done.drain(..) {
        on_reply.call(reply);
    }
    // Kept for the next poll of this thread (one that began while these
    // ran made its own).
    let _ = SPARE_DONE.try_with(|spare| {
        if spare.borrow().capacity() < done.capacity() && done.capacity() <= 1024 {
            *spare.borrow_mut() = done;
        }
    });
}

thread_local! {
    /// An empty list of replies to hand out, for the next poll: a poll
    /// callback allocates none.
    static SPARE_DONE: std::cell::RefCell<Done> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An empty list for the replies a poll reads: the thread's spare one, or a new one.
pub(super) fn done_list() -> Done {
    SPARE_DONE
        .try_with(|spare| std::mem::take(&mut *spare.borrow_mut()))
        .unwrap_or_default()
}

/// What the reactor and its connections do with libuv's handles as they run
/// (made and closed in [`setup`](super::setup), with libuv's functions).
impl Uv {
    pub unsafe fn poll_start(&self, h: Handle, events: c_int, cb: PollCb) -> bool {
        (self.poll_start)(h, events, cb) == 0
    }

    pub unsafe fn timer_start(&self, h: Handle, cb: TimerCb, ms: u64) {
        (self.timer_start)(h, cb, ms, 0);
    }

    pub unsafe fn set_ref(&self, h: Handle, on: bool) {
        if on {
            (self.ref_)(h)
        } else {
            (self.unref)(h)
        }
    }
}

/// A handle's `data` pointer: the first field of every libuv handle.
pub unsafe fn data(h: Handle) -> *mut c_void {
    *(h as *mut *mut c_void)
}

// The arguments of the JS thread's own calls (`hotCalls()`), read straight
// from Node-API, and their bodies run so that nothing unwinds into V8.

/// Runs an entry's body: what it returns, or, thrown, what failed (a panic
/// too, as an error, never across the boundary).
pub(super) fn run(
    env: sys::napi_env,
    body: impl FnOnce() -> napi::Result<sys::napi_value>,
) -> sys::napi_value {
    let failed = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => return value,
        Ok(Err(e)) => e,
        Err(_) => napi::Error::new(Status::GenericFailure, "lockdog: internal error"),
    };
    unsafe { JsError::from(failed).throw_into(env) };
    ptr::null_mut()
}

/// The call's first `N` arguments (`undefined` past those given).
pub(super) unsafe fn args<const N: usize>(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> napi::Result<[sys::napi_value; N]> {
    let mut argc = N;
    let mut argv = [ptr::null_mut(); N];
    napi::check_status!(unsafe {
        sys::napi_get_cb_info(
            env,
            info,
            &mut argc,
            argv.as_mut_ptr(),
            ptr::null_mut(),
            ptr::null_mut(),
        )
    })?;
    Ok(argv)
}

pub(super) fn value_type(
    env: sys::napi_env,
    value: sys::napi_value,
) -> napi::Result<sys::napi_valuetype> {
    let mut kind = 0;
    napi::check_status!(unsafe { sys::napi_typeof(env, value, &mut kind) })?;
    Ok(kind)
}

pub(super) fn invalid(name: &str, reason: &str) -> napi::Error {
    to_napi(LockError::invalid_value(name, reason)).into()
}

/// A number argument.
pub(super) fn number(env: sys::napi_env, value: sys::napi_value, name: &str) -> napi::Result<f64> {
    if value_type(env, value)? != sys::ValueType::napi_number {
        return Err(invalid(name, "must be a number"));
    }
    unsafe { f64::from_napi_value(env, value) }
}

/// The packed options: `None` for `undefined` or `null`.
pub(super) fn packed<'a>(
    env: sys::napi_env,
    value: sys::napi_value,
) -> napi::Result<Option<&'a [f64]>> {
    let kind = value_type(env, value)?;
    if kind == sys::ValueType::napi_undefined || kind == sys::ValueType::napi_null {
        return Ok(None);
    }
    let mut typed = false;
    napi::check_status!(unsafe { sys::napi_is_typedarray(env, value, &mut typed) })?;
    if !typed {
        return Err(invalid("options", "must be packed in a Float64Array"));
    }
    let (mut kind, mut len, mut data) = (0, 0usize, ptr::null_mut());
    let (mut buffer, mut offset) = (ptr::null_mut(), 0usize);
    napi::check_status!(unsafe {
        sys::napi_get_typedarray_info(
            env,
            value,
            &mut kind,
            &mut len,
            &mut data,
            &mut buffer,
            &mut offset,
        )
    })?;
    if kind != sys::TypedarrayType::float64_array {
        return Err(invalid("options", "must be packed in a Float64Array"));
    }
    if len == 0 {
        return Ok(Some(&[]));
    }
    // SAFETY: V8 keeps the array's `len` numbers at `data` for this call.
    Ok(Some(unsafe {
        std::slice::from_raw_parts(data.cast(), len)
    }))
}
