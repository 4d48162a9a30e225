//! A JS thread's reactor made on first use, inside a napi call (its loop's
//! prepare and timer handles, its async context), and torn down with its
//! environment: every libuv handle closed, and the environment's teardown
//! held until the last close callback ran (a loop closed with handles still
//! open aborts the process).

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::ptr;
use std::rc::{Rc, Weak};
use std::sync::{Arc, Mutex};

use napi::sys;

use super::conn::Conn;
use super::reactor::{current, ok, on_prepare, Reactor, REACTOR};
use super::runtime;
use super::uv::{self, Handle};
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
    let uv = uv::uv()?;
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
    if let Some(uv) = uv::uv() {
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
    if let Some(uv) = uv::uv() {
        uv.free_timer(h);
    }
    closed();
}
