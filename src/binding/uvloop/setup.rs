//! A JS thread's reactor made on first use, inside a napi call (its loop's
//! prepare and timer handles, its async context), and torn down with its
//! environment: every libuv handle closed, and the environment's teardown
//! held until the last close callback ran (a loop closed with handles still
//! open aborts the process). Here too: the few libuv functions the fast path
//! needs, found at run time in the process (Node exports libuv to addons;
//! without them there is no fast path), and its handles made and freed with
//! them; what the running reactor calls of them is `reactor.rs`'s.

use std::alloc::Layout;
use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void, CStr};
use std::ptr;
use std::rc::{Rc, Weak};
use std::sync::{Arc, Mutex, OnceLock};

use napi::sys;

use super::conn::Conn;
use super::reactor::{current, ok, on_prepare, Reactor, REACTOR};
use super::runtime;
use crate::binding::settle::JsQueue;

thread_local! {
    /// This thread's libuv handles not closed yet (a closed one is gone once
    /// its close callback ran).
    static OPEN: Cell<usize> = const { Cell::new(0) };
    /// The environment's teardown, waiting for those handles to be closed.
    static TEARDOWN: Cell<sys::napi_async_cleanup_hook_handle> = const { Cell::new(ptr::null_mut()) };
}

pub(super) fn opened() {
    let _ = OPEN.try_with(|n| n.set(n.get() + 1));
}

/// A handle's close callback ran: the last one lets a waiting teardown go on.
pub(super) fn closed() {
    let left = OPEN
        .try_with(|n| {
            n.set(n.get().saturating_sub(1));
            n.get()
        })
        .unwrap_or(0);
    if left == 0 {
        let hook = TEARDOWN
            .try_with(|t| t.replace(ptr::null_mut()))
            .unwrap_or(ptr::null_mut());
        if !hook.is_null() {
            unsafe { sys::napi_remove_async_cleanup_hook(hook) };
        }
    }
}

/// This JS thread's reactor, set up on first use (inside a napi call).
pub(super) fn reactor(env: sys::napi_env) -> Option<Rc<Reactor>> {
    if let Some(r) = current(env) {
        return Some(r);
    }
    if REACTOR.try_with(|r| r.borrow().is_some()).unwrap_or(true) {
        return None; // another environment on this thread owns it
    }
    if !runtime::loop_is_libuv(env) {
        return None;
    }
    let uv = uv()?;
    unsafe {
        let mut uv_loop = ptr::null_mut();
        ok(sys::napi_get_uv_event_loop(env, &mut uv_loop))?;
        let uv_loop = uv_loop.cast::<c_void>();
        let mut object = ptr::null_mut();
        ok(sys::napi_create_object(env, &mut object))?;
        let mut resource = ptr::null_mut();
        ok(sys::napi_create_reference(env, object, 1, &mut resource))?;
        let mut name = ptr::null_mut();
        let label = "lockdog.fast";
        ok(sys::napi_create_string_utf8(
            env,
            label.as_ptr().cast(),
            label.len() as isize,
            &mut name,
        ))?;
        let mut context = ptr::null_mut();
        ok(sys::napi_async_init(env, object, name, &mut context))?;
        let queue = JsQueue::of(env).ok()?;
        // Teardown closes every handle and waits for libuv to be done with
        // them: a loop closed with handles still open aborts the process.
        let mut hook = ptr::null_mut();
        ok(sys::napi_add_async_cleanup_hook(
            env,
            Some(cleanup),
            ptr::null_mut(),
            &mut hook,
        ))?;
        let Some(prepare) = uv.prepare(uv_loop, on_prepare) else {
            sys::napi_remove_async_cleanup_hook(hook);
            return None;
        };
        opened();
        let Some(timer) = uv.timer(uv_loop) else {
            sys::napi_remove_async_cleanup_hook(hook);
            uv.prepare_stop(prepare);
            uv.close(prepare, free_prepare);
            return None;
        };
        opened();
        // The timer only bounds replies owed on polled sockets, which keep the loop alive.
        uv.set_ref(timer, false);
        let r = Rc::new(Reactor {
            env,
            uv,
            uv_loop,
            timer,
            timer_at: Cell::new(None),
            prepare,
            corked: RefCell::default(),
            conns: RefCell::default(),
            clients: RefCell::default(),
            resource,
            context,
            queue,
            gate: Arc::new(Mutex::new(true)),
            alarms: RefCell::default(),
            timer_held: Cell::new(false),
        });
        REACTOR
            .try_with(|slot| *slot.borrow_mut() = Some(r.clone()))
            .ok()?;
        Some(r)
    }
}

/// The environment ends: close every handle; Node runs the loop until the
/// last close callback removed this hook.
unsafe extern "C" fn cleanup(hook: sys::napi_async_cleanup_hook_handle, _: *mut c_void) {
    let _ = TEARDOWN.try_with(|t| t.set(hook));
    let Some(r) = REACTOR.try_with(|r| r.borrow_mut().take()).ok().flatten() else {
        closed_all_already();
        return;
    };
    *r.gate.lock().unwrap_or_else(|p| p.into_inner()) = false;
    r.clients.borrow_mut().clear();
    // What an alarm would do needs the environment: it never runs.
    let alarms = std::mem::take(&mut *r.alarms.borrow_mut());
    drop(alarms);
    super::waiting::forget_all();
    let conns: Vec<Weak<Conn>> = r.conns.borrow_mut().drain(..).collect();
    for conn in conns.iter().filter_map(Weak::upgrade) {
        conn.abandon();
        conn.close();
    }
    r.corked.borrow_mut().clear();
    r.uv.prepare_stop(r.prepare);
    r.uv.close(r.prepare, free_prepare);
    r.uv.timer_stop(r.timer);
    r.uv.close(r.timer, free_timer);
}

unsafe extern "C" fn free_prepare(h: Handle) {
    if let Some(uv) = uv() {
        uv.free_prepare(h);
    }
    closed();
}

/// Nothing left to close: the teardown goes on at once.
pub(super) fn closed_all_already() {
    let _ = OPEN.try_with(|n| n.set(n.get() + 1));
    closed();
}

unsafe extern "C" fn free_timer(h: Handle) {
    if let Some(uv) = uv() {
        uv.free_timer(h);
    }
    closed();
}

// libuv's functions, found at run time in the process (Node exports libuv
// to addons; without them there is no fast path), and the handles made and
// closed with them.

pub type Handle = *mut c_void;
pub type PollCb = unsafe extern "C" fn(Handle, c_int, c_int);
pub type TimerCb = unsafe extern "C" fn(Handle);
pub type PrepareCb = unsafe extern "C" fn(Handle);
pub type CloseCb = unsafe extern "C" fn(Handle);

pub const READABLE: c_int = 1;
pub const WRITABLE: c_int = 2;
pub const DISCONNECT: c_int = 4;
const UV_POLL: c_int = 8;
const UV_PREPARE: c_int = 9;
const UV_TIMER: c_int = 13;

type PollInit = unsafe extern "C" fn(*mut c_void, Handle, c_int) -> c_int;
type PollStart = unsafe extern "C" fn(Handle, c_int, PollCb) -> c_int;
type TimerInit = unsafe extern "C" fn(*mut c_void, Handle) -> c_int;
type TimerStart = unsafe extern "C" fn(Handle, TimerCb, u64, u64) -> c_int;
type PrepareStart = unsafe extern "C" fn(Handle, PrepareCb) -> c_int;
type Stop = unsafe extern "C" fn(Handle) -> c_int;
type Close = unsafe extern "C" fn(Handle, Option<CloseCb>);
type Ref = unsafe extern "C" fn(Handle);
type HandleSize = unsafe extern "C" fn(c_int) -> usize;

pub struct Uv {
    pub(super) poll_init_socket: PollInit,
    pub(super) poll_start: PollStart,
    pub(super) timer_init: TimerInit,
    pub(super) timer_start: TimerStart,
    pub(super) timer_stop: Stop,
    pub(super) prepare_init: TimerInit,
    pub(super) prepare_start: PrepareStart,
    pub(super) prepare_stop: Stop,
    pub(super) close: Close,
    pub(super) ref_: Ref,
    pub(super) unref: Ref,
    pub(super) poll_size: usize,
    pub(super) timer_size: usize,
    pub(super) prepare_size: usize,
}

unsafe fn find(name: &CStr) -> Option<*mut c_void> {
    let f = libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr());
    (!f.is_null()).then_some(f)
}

/// libuv as found in this process, if all of it is there.
pub fn uv() -> Option<&'static Uv> {
    static UV: OnceLock<Option<Uv>> = OnceLock::new();
    UV.get_or_init(|| unsafe {
        let handle_size = std::mem::transmute::<*mut c_void, HandleSize>(find(c"uv_handle_size")?);
        Some(Uv {
            poll_init_socket: std::mem::transmute::<*mut c_void, PollInit>(find(
                c"uv_poll_init_socket",
            )?),
            poll_start: std::mem::transmute::<*mut c_void, PollStart>(find(c"uv_poll_start")?),
            timer_init: std::mem::transmute::<*mut c_void, TimerInit>(find(c"uv_timer_init")?),
            timer_start: std::mem::transmute::<*mut c_void, TimerStart>(find(c"uv_timer_start")?),
            timer_stop: std::mem::transmute::<*mut c_void, Stop>(find(c"uv_timer_stop")?),
            prepare_init: std::mem::transmute::<*mut c_void, TimerInit>(find(c"uv_prepare_init")?),
            prepare_start: std::mem::transmute::<*mut c_void, PrepareStart>(find(
                c"uv_prepare_start",
            )?),
            prepare_stop: std::mem::transmute::<*mut c_void, Stop>(find(c"uv_prepare_stop")?),
            close: std::mem::transmute::<*mut c_void, Close>(find(c"uv_close")?),
            ref_: std::mem::transmute::<*mut c_void, Ref>(find(c"uv_ref")?),
            unref: std::mem::transmute::<*mut c_void, Ref>(find(c"uv_unref")?),
            poll_size: handle_size(UV_POLL),
            timer_size: handle_size(UV_TIMER),
            prepare_size: handle_size(UV_PREPARE),
        })
        .filter(|uv| uv.poll_size > 0 && uv.timer_size > 0 && uv.prepare_size > 0)
    })
    .as_ref()
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size.max(64), 16).unwrap_or(Layout::new::<[u128; 64]>())
}

impl Uv {
    /// A zeroed handle of `size` bytes; freed by [`Uv::free`].
    fn alloc(size: usize) -> Handle {
        unsafe { std::alloc::alloc_zeroed(layout(size)).cast() }
    }

    /// Frees a closed poll handle.
    pub unsafe fn free_poll(&self, h: Handle) {
        std::alloc::dealloc(h.cast(), layout(self.poll_size));
    }

    pub unsafe fn free_timer(&self, h: Handle) {
        std::alloc::dealloc(h.cast(), layout(self.timer_size));
    }

    pub unsafe fn free_prepare(&self, h: Handle) {
        std::alloc::dealloc(h.cast(), layout(self.prepare_size));
    }

    /// A prepare handle (its callback runs before each wait of the loop),
    /// started, not holding the loop alive.
    pub unsafe fn prepare(&self, uv_loop: *mut c_void, cb: PrepareCb) -> Option<Handle> {
        let h = Self::alloc(self.prepare_size);
        if h.is_null() {
            return None;
        }
        if (self.prepare_init)(uv_loop, h) != 0 {
            self.free_prepare(h);
            return None;
        }
        if (self.prepare_start)(h, cb) != 0 {
            // Initialised: it is closed as any handle, then freed.
            self.close(h, free_prepare_cb);
            return None;
        }
        (self.unref)(h);
        Some(h)
    }

    pub unsafe fn prepare_stop(&self, h: Handle) {
        (self.prepare_stop)(h);
    }

    /// A poll handle on socket `fd` of `uv_loop` (None when libuv refuses it).
    pub unsafe fn poll(&self, uv_loop: *mut c_void, fd: c_int) -> Option<Handle> {
        let h = Self::alloc(self.poll_size);
        if h.is_null() {
            return None;
        }
        if (self.poll_init_socket)(uv_loop, h, fd) != 0 {
            self.free_poll(h);
            return None;
        }
        Some(h)
    }

    pub unsafe fn timer(&self, uv_loop: *mut c_void) -> Option<Handle> {
        let h = Self::alloc(self.timer_size);
        if h.is_null() {
            return None;
        }
        if (self.timer_init)(uv_loop, h) != 0 {
            self.free_timer(h);
            return None;
        }
        Some(h)
    }

    pub unsafe fn timer_stop(&self, h: Handle) {
        (self.timer_stop)(h);
    }

    pub unsafe fn close(&self, h: Handle, cb: CloseCb) {
        (self.close)(h, Some(cb));
    }
}

unsafe extern "C" fn free_prepare_cb(h: Handle) {
    if let Some(uv) = uv() {
        uv.free_prepare(h);
    }
}

pub unsafe fn set_data(h: Handle, data: *mut c_void) {
    *(h as *mut *mut c_void) = data;
}
