//! An acquisition on the JS thread (of any kind of lock), from
//! its first attempt to its outcome: the promise, the machine
//! (`core::drivers::uvloop::FastAcquire`), its commands on the node's connections, its
//! alarm on the reactor's timer, and the wakes other threads queue for it
//! (its turn, a release notice; while it waits, [`waiting`] holds it, and
//! wires what wakes it on this thread). And the JS thread's own acquire of
//! one key (`hotCalls().acquire`), which starts one.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use napi::bindgen_prelude::{within_runtime_if_available, FromNapiValue, PromiseRaw};
use napi::{sys, Env, JsValue};
use smallvec::SmallVec;

use super::conn::{key_of, lookup, Conn, FastClient, Found};
use super::reactor::{args, invalid, number, packed, run, value_type, Reactor};
use super::waiting;
use crate::binding::cancel::CancelHandle;
use crate::binding::client::settle_lock;
use crate::binding::errors::to_napi;
use crate::binding::lock::Taken;
use crate::binding::lock::{finish, promise, Deferred};
use crate::binding::options::{AcquireOptions, PACKED_LEN};
use crate::core::drivers::uvloop;
use crate::core::error::NodeAnswer;
use crate::core::ops::acquisition::Purpose;
use crate::core::transport::uvloop as transport;
use crate::core::{self as core, Request};

/// An acquisition driven on the JS thread; the request back when
/// this driver does not take it (by value: moved, not boxed on every call
/// for the rare hand-on).
#[allow(clippy::result_large_err)]
pub fn acquire<'env>(
    env: &'env Env,
    client: &core::Client,
    request: Request,
    cancel: Option<&CancelHandle>,
) -> std::result::Result<PromiseRaw<'env, Taken>, Request> {
    // Cancelled already: the other driver answers it without an attempt.
    if cancel.is_some_and(|c| c.token.is_cancelled()) {
        return Err(request);
    }
    let Some((r, fast)) = lookup(env, key_of(client)) else {
        return Err(request);
    };
    // The connections being opened: the commands wait for them.
    let Some(found) = fast.for_operation(&r) else {
        return Err(request);
    };
    let Some(runtime) = within_runtime_if_available(|| tokio::runtime::Handle::try_current().ok())
    else {
        return Err(request);
    };
    let raw_env = env.raw();
    let Ok((deferred, promise)) = promise(raw_env) else {
        return Err(request);
    };
    if !fast.warmed.replace(true) {
        // The watchdog renews on the runtime's connections: open now, they
        // are there for the first renewal.
        uvloop::warm_runtime(&client.inner, &runtime);
    }
    let opening: Vec<usize> = (0..found.len())
        .filter(|&i| matches!(found[i], Found::Opening))
        .collect();
    let mut op = uvloop::fast_acquire(&client.inner, request, runtime, !opening.is_empty())?;
    let conns = found
        .into_iter()
        .map(|f| match f {
            Found::Ready(conn) => Some(conn),
            _ => None,
        })
        .collect();
    let first = op.sends();
    let driving = Rc::new(Driving {
        id: Cell::new(None),
        client: key_of(client),
        op: RefCell::new(op),
        inbox: RefCell::default(),
        conns: RefCell::new(conns),
        reactor: r,
        deferred: Cell::new(Some(deferred)),
        env: raw_env,
        alarm: Cell::new(None),
        cancel_asked: Cell::new(false),
        close_asked: Cell::new(false),
        notice_asked: Cell::new(false),
        opening: Cell::new(opening.len()),
        due: Cell::new(None),
        told: RefCell::new(None),
    });
    if let Some(handle) = cancel {
        driving.tell_on_cancel(handle);
    }
    if !opening.is_empty() {
        // Its connections being opened: it begins once they are.
        driving.begin_once_open(&fast, opening);
    }
    driving.send_all(first);
    driving.rearm();
    Ok(PromiseRaw::new(raw_env, promise))
}

/// `hotCalls().acquire(client, key, options)`: see
/// [`hot_calls`](super::entry::hot_calls).
pub(super) unsafe extern "C" fn hot_acquire(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    run(env, || {
        let [client, key, options] = unsafe { args::<3>(env, info)? };
        let client = number(env, client, "client")?;
        if client.fract() != 0.0 || !(0.0..9007199254740992.0).contains(&client) {
            return Err(invalid("client", "names no client of this thread"));
        }
        if value_type(env, key)? != sys::ValueType::napi_string {
            return Err(invalid("key", "must be a non-empty string"));
        }
        let key = unsafe { String::from_napi_value(env, key)? };
        let options = packed(env, options)?;
        let napi_env = Env::from_raw(env);
        let fast = lookup(&napi_env, client as usize)
            .map(|(_, fast)| fast)
            .ok_or_else(|| invalid("client", "names no client of this thread"))?;
        let spec = spec_of(&fast, options)?;
        let request = Request::lock_key(&fast.client.inner, key, spec).map_err(to_napi)?;
        let promise = match acquire(&napi_env, &fast.client, request, None) {
            Ok(promise) => promise,
            Err(request) => {
                let client = fast.client.clone();
                let cancel = Default::default();
                settle_lock(&napi_env, async move {
                    client.acquire_prepared(request, cancel).await
                })?
            }
        };
        Ok(promise.raw())
    })
}

/// The options `packed` resolved for `fast`'s client: the last ones again
/// when they are the same numbers.
fn spec_of(fast: &FastClient, packed: Option<&[f64]>) -> napi::Result<core::AcquireSpec> {
    // Packed in the wrong length: never the last ones (`from_packed` says
    // what is wrong below).
    let numbers: Option<[f64; PACKED_LEN]> = match packed {
        None => Some([0.0; PACKED_LEN]),
        Some(p) => p.try_into().ok(),
    };
    if let (Some(numbers), Some((last, spec))) = (&numbers, &*fast.last_spec.borrow()) {
        if last
            .iter()
            .zip(numbers)
            .all(|(a, b)| a.to_bits() == b.to_bits())
        {
            return Ok(*spec);
        }
    }
    let options = match packed {
        Some(p) => AcquireOptions::from_packed(p).map_err(to_napi)?,
        None => AcquireOptions::default(),
    };
    let spec = options
        .to_core()
        .and_then(|o| fast.client.resolve(&o))
        .map_err(to_napi)?;
    if let Some(numbers) = numbers {
        *fast.last_spec.borrow_mut() = Some((numbers, spec));
    }
    Ok(spec)
}

/// An acquisition on the JS thread: the machine, the replies that came while
/// it was busy (a command answered as it is sent), and the caller's promise.
/// While it pauses, its alarm holds it (and keeps the loop alive).
pub(super) struct Driving {
    /// Its entry in [`waiting`], once it waits.
    id: Cell<Option<u64>>,
    /// Its client ([`key_of`]).
    pub(super) client: usize,
    op: RefCell<uvloop::FastAcquire>,
    inbox: RefCell<SmallVec<[(usize, Purpose, uvloop::Reply); 1]>>,
    /// Each node's connection, as of its last command (a broken one is
    /// replaced by the client's next one; `None` until one is open).
    pub(super) conns: RefCell<SmallVec<[Option<Rc<Conn>>; 4]>>,
    pub(super) reactor: Rc<Reactor>,
    pub(super) deferred: Cell<Option<Deferred>>,
    env: sys::napi_env,
    /// The reactor's alarm at the machine's `poll_timeout`.
    pub(super) alarm: Cell<Option<(Instant, u64)>>,
    /// The caller cancelled: the machine hears it at its next turn.
    pub(super) cancel_asked: Cell<bool>,
    /// Its client closes: the machine hears it at its next turn.
    pub(super) close_asked: Cell<bool>,
    /// Its place in the key's line was woken: the machine hears it at its next turn.
    pub(super) notice_asked: Cell<bool>,
    /// Its connections still being opened: at 0 the machine hears they are.
    pub(super) opening: Cell<usize>,
    /// Its alarm set for this instant went off: the machine hears the time at its next turn.
    pub(super) due: Cell<Option<Instant>>,
    /// What the caller's cancel handle calls (it holds it weakly).
    pub(super) told: RefCell<Option<Rc<dyn Fn()>>>,
}

/// A command's node and purpose as the tag its reply comes back with.
fn tag(node: usize, purpose: Purpose) -> u64 {
    let (kind, n) = match purpose {
        Purpose::Attempt(n) => (0, n),
        Purpose::Undo(n) => (1, n),
        Purpose::Leave(n) => (2, n),
    };
    ((node as u64) << 34) | (kind << 32) | u64::from(n)
}

/// [`tag`] read back.
fn untag(tag: u64) -> (usize, Purpose) {
    let n = tag as u32;
    let purpose = match (tag >> 32) & 3 {
        0 => Purpose::Attempt(n),
        1 => Purpose::Undo(n),
        _ => Purpose::Leave(n),
    };
    ((tag >> 34) as usize, purpose)
}

impl transport::Replies for Driving {
    fn reply(self: Rc<Self>, tag: u64, answer: uvloop::Reply) {
        let (node, purpose) = untag(tag);
        self.inbox.borrow_mut().push((node, purpose, answer));
        self.pump();
    }
}

impl Driving {
    /// Sends what the machine asked for, each on its node's connection, in
    /// order behind what went there before (an undo runs after its attempt);
    /// what is for a connection being opened waits for it, in that order.
    fn send_all(self: &Rc<Self>, sends: uvloop::Sends) {
        for s in sends {
            let deadline = Instant::now() + s.timeout;
            let node = s.node;
            let on_reply = transport::OnReply::To(self.clone(), tag(node, s.purpose));
            match self.conn(node) {
                Found::Ready(conn) => conn.send(s.packed, deadline, on_reply),
                Found::Opening => self.send_once_open(node, s.packed, deadline, on_reply),
                // An outage to the machine: it retries, by then connected again.
                Found::Down(why) => on_reply.call(Err(NodeAnswer::Unreachable(why.into()))),
            }
            self.reactor.arm_for(deadline);
        }
    }

    /// Node `node`'s connection: the one it used, or, once that broke (a
    /// cut, a server restart) or before one was open, the client's.
    fn conn(&self, node: usize) -> Found {
        let used = self.conns.borrow().get(node).cloned().flatten();
        if let Some(conn) = used.filter(|c| c.usable()) {
            return Found::Ready(conn);
        }
        let Some(fast) = self.reactor.clients.borrow().get(&self.client).cloned() else {
            return Found::Down("the client is closed".into());
        };
        let found = fast.find(&self.reactor, node);
        if let (Found::Ready(conn), Some(slot)) = (&found, self.conns.borrow_mut().get_mut(node)) {
            *slot = Some(conn.clone());
        }
        found
    }

    /// Feeds the machine what came (its client's close, the caller's cancel,
    /// a wake, its alarm, the replies in, one at a time); the caller's
    /// promise settles on the outcome.
    pub(super) fn pump(self: &Rc<Self>) {
        // Within the runtime, whoever calls (an abort or `close()` from JS, a
        // connection opened or refused): a won attempt's lock starts the
        // watchdog, and an undo or a give-back runs in the background.
        within_runtime_if_available(|| self.pump_in_runtime());
    }

    fn pump_in_runtime(self: &Rc<Self>) {
        loop {
            // Someone up the stack is feeding it: it takes this reply too.
            let Ok(mut op) = self.op.try_borrow_mut() else {
                return;
            };
            let step = if self.close_asked.replace(false) {
                op.close()
            } else if self.cancel_asked.replace(false) {
                op.cancel()
            } else if self.notice_asked.replace(false) {
                op.notice(Instant::now())
            } else if self.opening.get() == 0 && op.connecting() {
                op.connected(Instant::now())
            } else if let Some(at) = self.due.take() {
                op.timeout(Some(at), Instant::now())
            } else {
                let next = {
                    let mut inbox = self.inbox.borrow_mut();
                    (!inbox.is_empty()).then(|| inbox.remove(0))
                };
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

    /// It waits (for its turn, in the key's line, or in a pause): it is
    /// entered in [`waiting`], where a wake queued from another thread, or
    /// its client's `close()`, finds it, and its machine gets its waker.
    fn enter_waiting(self: &Rc<Self>) {
        let Ok(mut op) = self.op.try_borrow_mut() else {
            return;
        };
        if !op.wants_waker() {
            return;
        }
        let Some(id) = waiting::enter(self) else {
            return;
        };
        self.id.set(Some(id));
        let queue = self.reactor.queue.clone();
        op.wake_with(Arc::new(move || queue.run(move |_| waiting::woken(id))));
    }

    /// After its turn: entered in [`waiting`] if it now waits, and the
    /// reactor's alarm armed at the instant the machine names (a pause's
    /// end, its wait ending mid-attempt), or disarmed once
    /// there is none.
    pub(super) fn rearm(self: &Rc<Self>) {
        self.enter_waiting();
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

    fn settle(&self, step: uvloop::Step, faulted: bool) {
        let deferred = match step {
            uvloop::Step::Pending => return,
            _ => match self.deferred.take() {
                Some(d) => d,
                None => return,
            },
        };
        // Settled: nothing will wake it any more (whoever called holds it still).
        if let Some(id) = self.id.take() {
            drop(waiting::leave(id));
        }
        let env = self.env;
        match step {
            uvloop::Step::Pending => {}
            uvloop::Step::Won(lock) => finish(env, deferred, Ok(Taken(lock)), faulted),
            uvloop::Step::Failed(e) => finish::<Taken>(env, deferred, Err(to_napi(e)), faulted),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{tag, untag, Purpose};

    #[test]
    fn a_reply_comes_back_to_its_node_and_purpose() {
        for node in [0, 1, 4, 63, 1 << 20] {
            for purpose in [
                Purpose::Attempt(0),
                Purpose::Attempt(u32::MAX),
                Purpose::Undo(7),
                Purpose::Leave(u32::MAX),
            ] {
                assert_eq!(untag(tag(node, purpose)), (node, purpose));
            }
        }
    }
}
