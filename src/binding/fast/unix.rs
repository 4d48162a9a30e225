//! The fast path on unix: libuv poll handles on the JS thread's loop.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::ptr;
use std::rc::{Rc, Weak};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use napi::bindgen_prelude::{within_runtime_if_available, PromiseRaw, ToNapiValue};
use napi::{sys, Env, Result};
use redis::ConnectionInfo;
use tokio_util::sync::CancellationToken;

use super::uv::{self, Handle, Uv};
use crate::binding::errors::to_napi;
use crate::binding::lock::NativeLock;
use crate::binding::settle::{self, Deferred, JsQueue};
use crate::core::error::NodeAnswer;
use crate::core::fast::{self, wire, Done, OnReply, Outcome, Wire};
use crate::core::{self as core, Lock, Request};

/// How long a node whose fast connection failed to open stays on tokio.
const RETRY_CONNECT: Duration = Duration::from_millis(500);

/// One JS thread's loop, its deadline timer and its clients' fast state.
struct Reactor {
    env: sys::napi_env,
    uv: &'static Uv,
    uv_loop: *mut c_void,
    timer: Handle,
    timer_at: Cell<Option<Instant>>,
    conns: RefCell<Vec<Weak<Conn>>>,
    clients: RefCell<HashMap<usize, Rc<FastClient>>>,
    resource: sys::napi_ref,
    context: sys::napi_async_context,
    queue: JsQueue,
    /// Open while the environment lives: connect threads hand their result
    /// over only through an open gate (the queue dies with the environment).
    gate: Arc<Mutex<bool>>,
}

thread_local! {
    static REACTOR: RefCell<Option<Rc<Reactor>>> = const { RefCell::new(None) };
    /// This thread's libuv handles not closed yet (a closed one is gone once
    /// its close callback ran).
    static OPEN: Cell<usize> = const { Cell::new(0) };
    /// The environment's teardown, waiting for those handles to be closed.
    static TEARDOWN: Cell<sys::napi_async_cleanup_hook_handle> = const { Cell::new(ptr::null_mut()) };
}

fn opened() {
    let _ = OPEN.try_with(|n| n.set(n.get() + 1));
}

/// A handle's close callback ran: the last one lets a waiting teardown go on.
fn closed() {
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

fn ok(status: sys::napi_status) -> Option<()> {
    (status == sys::Status::napi_ok).then_some(())
}

/// This JS thread's reactor, if it has one.
fn current(env: sys::napi_env) -> Option<Rc<Reactor>> {
    REACTOR
        .try_with(|r| r.borrow().clone())
        .ok()
        .flatten()
        .filter(|r| r.env == env)
}

/// This JS thread's reactor, set up on first use (inside a napi call).
fn reactor(env: sys::napi_env) -> Option<Rc<Reactor>> {
    if let Some(r) = current(env) {
        return Some(r);
    }
    if REACTOR.try_with(|r| r.borrow().is_some()).unwrap_or(true) {
        return None; // another environment on this thread owns it
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
        let Some(timer) = uv.timer(uv_loop) else {
            sys::napi_remove_async_cleanup_hook(hook);
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
            conns: RefCell::default(),
            clients: RefCell::default(),
            resource,
            context,
            queue,
            gate: Arc::new(Mutex::new(true)),
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
    for conn in r.conns.borrow_mut().drain(..) {
        if let Some(conn) = conn.upgrade() {
            conn.close();
        }
    }
    r.uv.timer_stop(r.timer);
    r.uv.close(r.timer, free_timer);
}

/// Nothing left to close: the teardown goes on at once.
fn closed_all_already() {
    let _ = OPEN.try_with(|n| n.set(n.get() + 1));
    closed();
}

unsafe extern "C" fn free_timer(h: Handle) {
    if let Some(uv) = uv::uv() {
        uv.free_timer(h);
    }
    closed();
}

impl Reactor {
    /// Runs `f` as a callback into JS would: a handle scope, the runtime
    /// entered (the core may start tasks), and the microtasks that settled
    /// promises queued run when it ends.
    fn in_scope(&self, f: impl FnOnce()) {
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
    fn arm_for(&self, at: Instant) {
        if self.timer_at.get().is_some_and(|t| t <= at) {
            return;
        }
        self.timer_at.set(Some(at));
        let ms = at.saturating_duration_since(Instant::now()).as_millis() as u64 + 1;
        unsafe { self.uv.timer_start(self.timer, on_timer, ms) };
    }

    /// The earliest deadline of any reply owed (dropping closed connections).
    fn next_deadline(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
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
    });
    if let Some(at) = r.next_deadline() {
        r.arm_for(at);
    }
}

fn deliver(done: Done) {
    for (on_reply, reply) in done {
        on_reply(reply);
    }
}

/// One fast connection and its poll handle.
struct Conn {
    uv: &'static Uv,
    wire: RefCell<Wire>,
    handle: Handle,
    events: Cell<c_int>,
    /// The handle keeps the loop alive (replies are owed).
    busy: Cell<bool>,
    closed: Cell<bool>,
    /// Its client closed: it closes once no reply is owed.
    retired: Cell<bool>,
}

impl Conn {
    fn open(r: &Rc<Reactor>, sock: wire::Socket) -> Option<Rc<Conn>> {
        let handle = unsafe { r.uv.poll(r.uv_loop, sock.raw_fd())? };
        opened();
        let conn = Rc::new(Conn {
            uv: r.uv,
            wire: RefCell::new(Wire::new(sock)),
            handle,
            events: Cell::new(0),
            busy: Cell::new(true),
            closed: Cell::new(false),
            retired: Cell::new(false),
        });
        // The handle owns one reference, given back in `on_close`.
        unsafe { uv::set_data(handle, Rc::into_raw(conn.clone()) as *mut c_void) };
        r.conns.borrow_mut().push(Rc::downgrade(&conn));
        conn.update();
        (!conn.closed.get()).then_some(conn)
    }

    fn usable(&self) -> bool {
        !self.closed.get()
            && !self.retired.get()
            && self.wire.try_borrow().is_ok_and(|w| !w.is_broken())
    }

    fn send(&self, cmd: &[u8], retry: Vec<u8>, deadline: Instant, on_reply: OnReply) {
        let mut done = Done::new();
        match self.wire.try_borrow_mut() {
            Ok(mut w) => w.send(cmd, Some(retry), deadline, on_reply, &mut done),
            Err(_) => done.push((
                on_reply,
                Err(NodeAnswer::Unreachable("the connection is busy".into())),
            )),
        }
        deliver(done);
        self.update();
    }

    /// Polls for what the connection needs now; closes it once it is done.
    fn update(&self) {
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

    fn retire(&self) {
        self.retired.set(true);
        self.update();
    }

    fn close(&self) {
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
        let mut done = Done::new();
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

/// A node's fast connection, as far as it got.
enum Slot {
    /// None yet; the next operation may try again from this instant on.
    Idle(Option<Instant>),
    Connecting,
    Ready(Rc<Conn>),
}

/// One client's fast connections on this JS thread.
struct FastClient {
    key: usize,
    infos: Vec<ConnectionInfo>,
    connect_timeout: Duration,
    slots: Vec<RefCell<Slot>>,
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
    fn ready(&self, r: &Reactor) -> Option<Vec<Rc<Conn>>> {
        let mut conns = Vec::with_capacity(self.slots.len());
        for (i, slot) in self.slots.iter().enumerate() {
            let mut slot = slot.borrow_mut();
            if let Slot::Ready(conn) = &*slot {
                if conn.usable() {
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
        (conns.len() == self.slots.len()).then_some(conns)
    }

    /// Opens node `i`'s connection on a thread of its own; the JS thread
    /// takes it over when done.
    fn connect(&self, r: &Reactor, i: usize) -> Slot {
        let info = self.infos[i].clone();
        let timeout = self.connect_timeout;
        let key = self.key;
        let queue = r.queue.clone();
        let gate = r.gate.clone();
        let opening = std::thread::Builder::new()
            .name("lockdog-connect".into())
            .spawn(move || {
                let opened = wire::connect(&info, timeout);
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
fn installed(
    env: sys::napi_env,
    key: usize,
    i: usize,
    opened: std::result::Result<wire::Socket, String>,
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

fn key_of(client: &core::Client) -> usize {
    Arc::as_ptr(client.inner()) as usize
}

/// Sets up the fast path for a new client, when it can take it.
pub fn register(env: &Env, client: &core::Client) {
    if fast::switched_off() {
        return;
    }
    let Some(infos) = client.fast_targets() else {
        return;
    };
    let Some(r) = reactor(env.raw()) else { return };
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

/// The client closes: no more fast operations.
pub fn retire(client: &core::Client) {
    forget(client)
}

fn lookup(env: &Env, key: usize) -> Option<(Rc<Reactor>, Rc<FastClient>)> {
    let r = current(env.raw())?;
    let fast = r.clients.borrow().get(&key).cloned()?;
    Some((r, fast))
}

/// Settles at once, or after the events the operation reported.
fn finish<T: ToNapiValue + Send + 'static>(
    env: sys::napi_env,
    deferred: Deferred,
    result: Result<T>,
    in_turn: bool,
) {
    if in_turn {
        settle::settle_in_turn(env, deferred, result);
    } else {
        deferred.settle(env, result);
    }
}

/// Sends one operation's command to every node; `answer` takes each reply
/// and, once, the outcome: (settle it, after reported events?).
fn fan_out<Op: 'static>(
    r: &Reactor,
    conns: &[Rc<Conn>],
    op: Op,
    cmd: (Vec<u8>, Vec<u8>),
    timeout: Duration,
    answer: impl Fn(&mut Op, usize, wire::Reply) + 'static,
) {
    let op = Rc::new(RefCell::new(op));
    let answer = Rc::new(answer);
    let deadline = Instant::now() + timeout;
    for (i, conn) in conns.iter().enumerate() {
        let (op, answer) = (op.clone(), answer.clone());
        conn.send(
            &cmd.0,
            cmd.1.clone(),
            deadline,
            Box::new(move |reply| {
                if let Ok(mut op) = op.try_borrow_mut() {
                    answer(&mut op, i, reply);
                }
            }),
        );
    }
    r.arm_for(deadline);
}

/// A first acquire attempt on the fast path; the request back when it cannot take it.
pub fn acquire<'env>(
    env: &'env Env,
    client: &core::Client,
    request: Box<Request>,
) -> std::result::Result<PromiseRaw<'env, NativeLock>, Box<Request>> {
    let Some((r, fast)) = lookup(env, key_of(client)) else {
        return Err(request);
    };
    let Some(conns) = fast.ready(&r) else {
        return Err(request);
    };
    let raw_env = env.raw();
    let Ok((deferred, promise)) = settle::promise(raw_env) else {
        return Err(request);
    };
    let mut op = client.fast_acquire(request)?;
    let cmd = (op.packed.evalsha.clone(), op.packed.eval.clone());
    let timeout = op.timeout;
    let client = client.clone();
    let mut deferred = Some(deferred);
    let undo_conns = conns.clone();
    op.sending();
    let settle_op = move |op: &mut fast::FastAcquire, i: usize, reply: wire::Reply| {
        let Some(outcome) = op.answer(i, reply) else {
            return;
        };
        let Some(deferred) = deferred.take() else {
            return;
        };
        match outcome {
            Outcome::Won(lock) => {
                let faulted = op.faulted();
                finish(raw_env, deferred, Ok(NativeLock { lock }), faulted);
            }
            Outcome::Failed(e) => finish::<NativeLock>(raw_env, deferred, Err(to_napi(e)), false),
            Outcome::Resume(resume) => {
                // Undone here first, behind the attempt on its own connection: a
                // stalled node then runs the undo after the attempt, never before.
                if let Some((release, nodes, timeout)) = op.take_undo() {
                    let deadline = Instant::now() + timeout;
                    for i in nodes {
                        if let Some(conn) = undo_conns.get(i) {
                            conn.send(
                                &release.evalsha,
                                release.eval.clone(),
                                deadline,
                                Box::new(|_| {}),
                            );
                        }
                    }
                }
                let client = client.clone();
                let _ = settle::settle_deferred_later(raw_env, deferred, async move {
                    let lock = client
                        .acquire_resumed(*resume, CancellationToken::new())
                        .await
                        .map_err(to_napi)?;
                    Ok(NativeLock { lock })
                });
            }
        }
    };
    let settle_op = RefCell::new(settle_op);
    fan_out(&r, &conns, op, cmd, timeout, move |op, i, reply| {
        if let Ok(mut f) = settle_op.try_borrow_mut() {
            f(op, i, reply)
        }
    });
    Ok(PromiseRaw::new(raw_env, promise))
}

/// A release on the fast path, or `None` for the tokio path.
pub fn release<'env>(env: &'env Env, lock: &Lock) -> Option<PromiseRaw<'env, bool>> {
    if !fast::plain_release(lock) {
        return None;
    }
    let (r, fast) = lookup(env, Arc::as_ptr(lock.parts().1) as usize)?;
    let conns = fast.ready(&r)?;
    let raw_env = env.raw();
    let (deferred, promise) = settle::promise(raw_env).ok()?;
    match fast::fast_release(lock) {
        Err(answer) => deferred.settle(raw_env, Ok(answer)),
        Ok(op) => {
            let cmd = (op.packed.evalsha.clone(), op.packed.eval.clone());
            let timeout = op.timeout;
            let deferred = RefCell::new(Some(deferred));
            fan_out(&r, &conns, op, cmd, timeout, move |op, i, reply| {
                if let Some(out) = op.answer(i, reply) {
                    if let Some(d) = deferred.borrow_mut().take() {
                        finish(raw_env, d, out.map_err(to_napi), op.faulted());
                    }
                }
            });
        }
    }
    Some(PromiseRaw::new(raw_env, promise))
}

/// An extension on the fast path, or `None` for the tokio path.
pub fn extend<'env>(env: &'env Env, lock: &Lock, ttl: Duration) -> Option<PromiseRaw<'env, ()>> {
    let (r, fast) = lookup(env, Arc::as_ptr(lock.parts().1) as usize)?;
    let conns = fast.ready(&r)?;
    let op = fast::fast_extend(lock, ttl)?;
    let raw_env = env.raw();
    let (deferred, promise) = settle::promise(raw_env).ok()?;
    let cmd = (op.packed.evalsha.clone(), op.packed.eval.clone());
    let timeout = op.timeout;
    let deferred = RefCell::new(Some(deferred));
    fan_out(&r, &conns, op, cmd, timeout, move |op, i, reply| {
        if let Some(out) = op.answer(i, reply) {
            if let Some(d) = deferred.borrow_mut().take() {
                finish(raw_env, d, out.map_err(to_napi), op.faulted());
            }
        }
    });
    Some(PromiseRaw::new(raw_env, promise))
}
