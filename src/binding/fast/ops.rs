//! The fast path's operations on the JS thread: each sends its command to
//! every node's connection and settles its promise in the poll callback
//! that reads the deciding reply.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};
use napi::{sys, Env};
use tokio_util::sync::CancellationToken;

use super::clients::{key_of, lookup};
use super::conn::Conn;
use super::reactor::Reactor;
use crate::binding::cancel::CancelHandle;
use crate::binding::errors::{to_napi, JsResult};
use crate::binding::lock::NativeLock;
use crate::binding::settle::{self, Deferred};
use crate::core::error::NodeAnswer;
use crate::core::fast;
use crate::core::ops::acquisition::Purpose;
use crate::core::{self as core, Lock, Request};

/// Settles at once, or after the events the operation reported.
pub(super) fn finish<T: ToNapiValue + Send + 'static>(
    env: sys::napi_env,
    deferred: Deferred,
    result: JsResult<T>,
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
pub(super) fn fan_out<Op: 'static>(
    r: &Reactor,
    conns: &[Rc<Conn>],
    op: Op,
    cmd: fast::Packed,
    timeout: Duration,
    answer: impl Fn(&mut Op, usize, fast::Reply) + 'static,
) {
    let op = Rc::new(RefCell::new(op));
    let answer = Rc::new(answer);
    let deadline = Instant::now() + timeout;
    for (i, conn) in conns.iter().enumerate() {
        let (op, answer) = (op.clone(), answer.clone());
        conn.send(
            cmd.clone(),
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

/// A plain lock's acquisition driven on the JS thread; the request back when
/// this driver does not take it.
pub fn acquire<'env>(
    env: &'env Env,
    client: &core::Client,
    request: Box<Request>,
    cancel: Option<&CancelHandle>,
) -> std::result::Result<PromiseRaw<'env, NativeLock>, Box<Request>> {
    // Cancelled already: the other driver answers it without an attempt.
    if cancel.is_some_and(|c| c.token.is_cancelled()) {
        return Err(request);
    }
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
    let mut op = fast::fast_acquire(client, request)?;
    let first = op.sends();
    let driving = Rc::new(Driving {
        op: RefCell::new(op),
        inbox: RefCell::new(VecDeque::new()),
        conns,
        reactor: r,
        deferred: Cell::new(Some(deferred)),
        client: client.clone(),
        env: raw_env,
        alarm: Cell::new(None),
        cancel: cancel.map(|c| c.token.clone()),
        cancel_asked: Cell::new(false),
        told: RefCell::new(None),
    });
    if let Some(handle) = cancel {
        let weak = Rc::downgrade(&driving);
        let tell: Rc<dyn Fn()> = Rc::new(move || {
            if let Some(d) = weak.upgrade() {
                d.cancel_asked.set(true);
                d.pump();
                d.rearm();
            }
        });
        handle.on_cancel(Rc::downgrade(&tell));
        *driving.told.borrow_mut() = Some(tell);
    }
    driving.send_all(first);
    driving.rearm();
    Ok(PromiseRaw::new(raw_env, promise))
}

/// An acquisition on the JS thread: the machine, the replies that came while
/// it was busy (a command answered as it is sent), and the caller's promise.
struct Driving {
    op: RefCell<fast::FastAcquire>,
    inbox: RefCell<VecDeque<(usize, Purpose, fast::Reply)>>,
    conns: Vec<Rc<Conn>>,
    reactor: Rc<Reactor>,
    deferred: Cell<Option<Deferred>>,
    client: core::Client,
    env: sys::napi_env,
    /// The reactor's alarm at the machine's `poll_timeout`, while it runs here.
    alarm: Cell<Option<(Instant, u64)>>,
    /// The caller's cancel, for the tokio driver if it goes on there.
    cancel: Option<CancellationToken>,
    /// The caller cancelled: the machine hears it at its next turn.
    cancel_asked: Cell<bool>,
    /// What the caller's cancel handle calls (it holds it weakly).
    told: RefCell<Option<Rc<dyn Fn()>>>,
}

impl Driving {
    /// Sends what the machine asked for, each on its node's connection, in
    /// order behind what went there before (an undo runs after its attempt).
    fn send_all(self: &Rc<Self>, sends: Vec<fast::Send>) {
        for s in sends {
            let deadline = Instant::now() + s.timeout;
            let (node, purpose) = (s.node, s.purpose);
            let me = self.clone();
            let on_reply = Box::new(move |reply| {
                me.inbox.borrow_mut().push_back((node, purpose, reply));
                me.pump();
            });
            match self.conns.get(node) {
                Some(conn) => conn.send(s.packed, deadline, on_reply),
                None => on_reply(Err(NodeAnswer::Unreachable("no connection".into()))),
            }
            self.reactor.arm_for(deadline);
        }
    }

    /// Feeds the machine the replies in, one at a time; the caller's promise
    /// settles on the outcome, or the tokio driver goes on once it pauses.
    fn pump(self: &Rc<Self>) {
        loop {
            // Someone up the stack is feeding it: it takes this reply too.
            let Ok(mut op) = self.op.try_borrow_mut() else {
                return;
            };
            let step = if self.cancel_asked.replace(false) {
                op.cancel()
            } else {
                let next = self.inbox.borrow_mut().pop_front();
                let Some((node, purpose, reply)) = next else {
                    return;
                };
                op.answer(node, purpose, reply, Instant::now())
            };
            let sends = op.sends();
            let faulted = op.faulted();
            drop(op);
            self.settle(step, faulted);
            self.send_all(sends);
            self.rearm();
        }
    }

    /// Arms the reactor's alarm at the instant the machine names (its wait
    /// ending mid-attempt, a node's bound), or disarms it once there is none.
    fn rearm(self: &Rc<Self>) {
        let Ok(op) = self.op.try_borrow() else {
            return;
        };
        let at = op.poll_timeout();
        drop(op);
        let armed = self.alarm.get();
        if armed.map(|(t, _)| t) == at {
            return;
        }
        if let Some(key) = armed {
            self.alarm.set(None);
            self.reactor.disarm(key);
        }
        if let Some(at) = at {
            let me = self.clone();
            let key = self.reactor.alarm(at, Box::new(move || me.alarmed(at)));
            self.alarm.set(Some(key));
        }
    }

    /// The alarm at `at` went off: the machine hears the time.
    fn alarmed(self: &Rc<Self>, at: Instant) {
        if self.alarm.get().is_some_and(|(t, _)| t == at) {
            self.alarm.set(None);
        }
        let Ok(mut op) = self.op.try_borrow_mut() else {
            return;
        };
        let step = op.timeout(Instant::now());
        let sends = op.sends();
        let faulted = op.faulted();
        drop(op);
        self.settle(step, faulted);
        self.send_all(sends);
        self.pump();
        self.rearm();
    }

    fn settle(&self, step: fast::Step, faulted: bool) {
        let deferred = match step {
            fast::Step::Pending => return,
            _ => match self.deferred.take() {
                Some(d) => d,
                None => return,
            },
        };
        let env = self.env;
        match step {
            fast::Step::Pending => {}
            fast::Step::Won(lock) => finish(env, deferred, Ok(NativeLock { lock }), faulted),
            fast::Step::Failed(e) => finish::<NativeLock>(env, deferred, Err(to_napi(e)), faulted),
            fast::Step::Continue(next) => {
                let client = self.client.clone();
                let cancel = self.cancel.clone().unwrap_or_default();
                let _ = settle::settle_deferred_later(env, deferred, async move {
                    let lock = client
                        .acquire_continued(*next, cancel)
                        .await
                        .map_err(to_napi)?;
                    Ok(NativeLock { lock })
                });
            }
        }
    }
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
        Ok(op) => settle_when_decided(&r, &conns, op, raw_env, deferred),
    }
    Some(PromiseRaw::new(raw_env, promise))
}

/// An extension on the fast path, or `None` for the tokio path.
pub fn extend<'env>(env: &'env Env, lock: &Lock, ttl: Duration) -> Option<PromiseRaw<'env, ()>> {
    let (r, fast) = lookup(env, Arc::as_ptr(lock.parts().1) as usize)?;
    let conns = fast.ready(&r)?;
    let op = fast::fast_extend(lock, ttl, Instant::now())?;
    let raw_env = env.raw();
    let (deferred, promise) = settle::promise(raw_env).ok()?;
    settle_when_decided(&r, &conns, op, raw_env, deferred);
    Some(PromiseRaw::new(raw_env, promise))
}

/// Sends a release or an extension and settles `deferred` with its outcome
/// (after the events it reported).
fn settle_when_decided<Op>(
    r: &Reactor,
    conns: &[Rc<Conn>],
    op: Op,
    raw_env: sys::napi_env,
    deferred: Deferred,
) where
    Op: fast::Decided + 'static,
    Op::Out: ToNapiValue + Send + 'static,
{
    let cmd = op.packed();
    let timeout = op.timeout();
    let deferred = RefCell::new(Some(deferred));
    fan_out(r, conns, op, cmd, timeout, move |op, i, reply| {
        if let Some(out) = op.answer(i, reply) {
            if let Some(d) = deferred.borrow_mut().take() {
                finish(raw_env, d, out.map_err(to_napi), op.faulted());
            }
        }
    });
}
