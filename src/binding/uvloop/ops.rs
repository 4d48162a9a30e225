//! The fast path's release and extend on the JS thread: each sends its
//! command to every node's connection and settles its promise in the poll
//! callback that reads the deciding reply.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};
use napi::{sys, Env};

use super::conn::Conn;
use super::conn::{lookup, FastClient, Found, Founds};
use super::reactor::Reactor;
use crate::binding::errors::to_napi;
use crate::binding::lock::{finish, promise, Deferred};
use crate::core::drivers::uvloop;
use crate::core::engine::lock::Release;
use crate::core::error::NodeAnswer;
use crate::core::transport::uvloop as transport;
use crate::core::Lock;

/// Sends one operation's command to every node (one being opened: once it
/// is; one down answers unreachable); `answer` takes each reply and, once,
/// the outcome: (settle it, after reported events?).
pub(super) fn fan_out<Op: 'static>(
    r: &Reactor,
    fast: &FastClient,
    found: Founds,
    op: Op,
    cmd: uvloop::Packed,
    timeout: Duration,
    answer: impl Fn(&mut Op, usize, uvloop::Reply) + 'static,
) {
    let deadline = Instant::now() + timeout;
    let mut found = found;
    if found.len() == 1 {
        // One node: its reply's closure owns the operation.
        let mut op = op;
        let on_reply = transport::OnReply::new(move |reply| answer(&mut op, 0, reply));
        if let Some(one) = found.pop() {
            send_to(r, fast, 0, one, cmd, deadline, on_reply);
        }
    } else {
        // The operation and what takes its replies, shared by every node's.
        let shared = Rc::new((RefCell::new(op), answer));
        for (i, found) in found.into_iter().enumerate() {
            let shared = shared.clone();
            let on_reply = transport::OnReply::new(move |reply| {
                let (op, answer) = &*shared;
                if let Ok(mut op) = op.try_borrow_mut() {
                    answer(&mut op, i, reply);
                }
            });
            send_to(r, fast, i, found, cmd.clone(), deadline, on_reply);
        }
    }
    r.arm_for(deadline);
}

/// Sends `cmd` to node `i` (one being opened: once it is; one down answers
/// unreachable).
fn send_to(
    r: &Reactor,
    fast: &FastClient,
    i: usize,
    found: Found,
    cmd: uvloop::Packed,
    deadline: Instant,
    on_reply: transport::OnReply,
) {
    let send = move |opened: Result<Rc<Conn>, String>| match opened {
        Ok(conn) => conn.send(cmd, deadline, on_reply),
        Err(why) => on_reply.call(Err(NodeAnswer::Unreachable(why.into()))),
    };
    match found {
        Found::Ready(conn) => send(Ok(conn)),
        Found::Opening => fast.when_open(r, i, Box::new(send)),
        Found::Down(why) => send(Err(why)),
    }
}

/// A release on the fast path, or `None` for the tokio path.
pub fn release<'env>(env: &'env Env, lock: &Lock) -> Option<PromiseRaw<'env, Release>> {
    let (r, fast) = lookup(env, Arc::as_ptr(lock.parts().1) as usize)?;
    let found = fast.for_command(&r);
    let raw_env = env.raw();
    let (deferred, promise) = promise(raw_env).ok()?;
    match uvloop::fast_release(lock) {
        Err(answer) => deferred.settle(raw_env, Ok(answer)),
        Ok(sent) => settle_when_decided(&r, &fast, found, sent, raw_env, deferred),
    }
    Some(PromiseRaw::new(raw_env, promise))
}

/// An extension on the fast path, or `None` for the tokio path.
pub fn extend<'env>(env: &'env Env, lock: &Lock, ttl: Duration) -> Option<PromiseRaw<'env, ()>> {
    let (r, fast) = lookup(env, Arc::as_ptr(lock.parts().1) as usize)?;
    let found = fast.for_command(&r);
    let sent = uvloop::fast_extend(lock, ttl, Instant::now())?;
    let raw_env = env.raw();
    let (deferred, promise) = promise(raw_env).ok()?;
    settle_when_decided(&r, &fast, found, sent, raw_env, deferred);
    Some(PromiseRaw::new(raw_env, promise))
}

/// Sends a release or an extension (the operation and its command) and
/// settles `deferred` with its outcome (after the events it reported).
fn settle_when_decided<Op>(
    r: &Reactor,
    fast: &FastClient,
    found: Founds,
    (op, cmd): (Op, uvloop::Packed),
    raw_env: sys::napi_env,
    deferred: Deferred,
) where
    Op: uvloop::Decided + 'static,
    Op::Out: ToNapiValue + Send + 'static,
{
    let timeout = op.timeout();
    let deferred = RefCell::new(Some(deferred));
    fan_out(r, fast, found, op, cmd, timeout, move |op, i, reply| {
        if let Some(out) = op.answer(i, reply) {
            if let Some(d) = deferred.borrow_mut().take() {
                finish(raw_env, d, out.map_err(to_napi), op.faulted());
            }
        }
    });
}
