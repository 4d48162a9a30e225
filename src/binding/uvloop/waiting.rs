//! This thread's acquisitions that wait (their turn in a key's line, a
//! release notice, a pause): a table by id, where a wake queued from
//! another thread, or its client's `close()` or end, finds its acquisition.
//! An acquisition that wins at its first attempt never enters it. And what
//! wakes a waiting acquisition from the JS thread itself: its caller's
//! cancel, its connections opened, its alarm.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use napi::bindgen_prelude::within_runtime_if_available;

use super::acquire::Driving;
use super::conn::{FastClient, Opened};
use crate::binding::cancel::CancelHandle;
use crate::binding::lock::ById;
use crate::core::drivers::uvloop;
use crate::core::error::NodeAnswer;
use crate::core::transport::uvloop as transport;

/// This thread's acquisitions waiting, by id.
type Waiting = HashMap<u64, Rc<Driving>, ById>;

thread_local! {
    /// This thread's acquisitions not settled yet, by id: a wake from another
    /// thread finds its acquisition here, and this holds it while it waits
    /// for its turn with nothing else to (no reply owed, no alarm set).
    static WAITING: RefCell<(u64, Waiting)> = RefCell::default();
}

/// The environment of client `client` ends: its acquisitions go, unsettled.
pub(in crate::binding) fn forget_of(client: usize) {
    let gone: Vec<Rc<Driving>> = WAITING
        .try_with(|w| {
            let mut w = w.borrow_mut();
            let ids: Vec<u64> =
                w.1.iter()
                    .filter(|(_, d)| d.client == client)
                    .map(|(id, _)| *id)
                    .collect();
            ids.iter().filter_map(|id| w.1.remove(id)).collect()
        })
        .unwrap_or_default();
    for d in &gone {
        d.forget();
    }
}

/// The environment ends: the acquisitions still waiting go, unsettled.
pub(super) fn forget_all() {
    let all = WAITING
        .try_with(|w| std::mem::take(&mut w.borrow_mut().1))
        .unwrap_or_default();
    for d in all.values() {
        d.forget();
    }
}

/// The client `client` closes: its acquisitions on this thread end at once.
pub(super) fn closing(client: usize) {
    let driving: Vec<Rc<Driving>> = WAITING
        .try_with(|w| {
            w.borrow()
                .1
                .values()
                .filter(|d| d.client == client)
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    for d in driving {
        d.close_asked.set(true);
        d.turn();
    }
}

/// Gives the acquisition `id` of this thread its turn: its place was woken.
pub(super) fn woken(id: u64) {
    let driving = WAITING
        .try_with(|w| w.borrow().1.get(&id).cloned())
        .ok()
        .flatten();
    if let Some(d) = driving {
        within_runtime_if_available(|| {
            d.notice_asked.set(true);
            d.turn();
        });
    }
}

/// Enters `d` in the table: its id there.
pub(super) fn enter(d: &Rc<Driving>) -> Option<u64> {
    WAITING
        .try_with(|w| {
            let mut w = w.borrow_mut();
            w.0 += 1;
            let id = w.0;
            w.1.insert(id, d.clone());
            id
        })
        .ok()
}

/// Takes `id` out of the table (settled: nothing will wake it any more).
pub(super) fn leave(id: u64) -> Option<Rc<Driving>> {
    WAITING
        .try_with(|w| w.borrow_mut().1.remove(&id))
        .ok()
        .flatten()
}

/// What wakes an acquisition on its own thread, and what ends it unsettled.
impl Driving {
    /// The caller's cancel handle asks it to stop at its next turn (the
    /// handle holds what it calls weakly: a settled acquisition is gone).
    pub(super) fn tell_on_cancel(self: &Rc<Self>, handle: &CancelHandle) {
        let weak = Rc::downgrade(self);
        let tell: Rc<dyn Fn()> = Rc::new(move || {
            if let Some(d) = weak.upgrade() {
                d.cancel_asked.set(true);
                d.turn();
            }
        });
        handle.on_cancel(Rc::downgrade(&tell));
        *self.told.borrow_mut() = Some(tell);
    }

    /// Its connections to `opening` being opened: it begins once they are.
    pub(super) fn begin_once_open(self: &Rc<Self>, fast: &FastClient, opening: Vec<usize>) {
        for node in opening {
            let weak = Rc::downgrade(self);
            let then: Opened = Box::new(move |_| {
                if let Some(d) = weak.upgrade() {
                    d.opening.set(d.opening.get().saturating_sub(1));
                    if d.opening.get() == 0 {
                        d.turn();
                    }
                }
            });
            fast.when_open(&self.reactor, node, then);
        }
    }

    /// `packed` for node `node`, whose connection is being opened: sent
    /// once it is, in the order it was asked for; never sent, an outage to
    /// the machine (which retries).
    pub(super) fn send_once_open(
        self: &Rc<Self>,
        node: usize,
        packed: uvloop::Packed,
        deadline: Instant,
        on_reply: transport::OnReply,
    ) {
        let me = self.clone();
        let then: Opened = Box::new(move |opened| match opened {
            Ok(conn) => {
                if let Some(slot) = me.conns.borrow_mut().get_mut(node) {
                    *slot = Some(conn.clone());
                }
                conn.send(packed, deadline, on_reply);
                me.reactor.arm_for(deadline);
            }
            Err(why) => on_reply.call(Err(NodeAnswer::Unreachable(why.into()))),
        });
        match self.reactor.clients.borrow().get(&self.client).cloned() {
            Some(fast) => fast.when_open(&self.reactor, node, then),
            None => then(Err("the client is closed".into())),
        }
    }

    /// The alarm at `at` went off: the machine hears the time (a pause ends,
    /// or the wait).
    pub(super) fn alarmed(self: &Rc<Self>, at: Instant) {
        if self.alarm.get().is_some_and(|(t, _)| t == at) {
            self.alarm.set(None);
        }
        self.due.set(Some(at));
        self.turn();
    }

    /// Its turn: the machine hears what was asked of it, then its alarm is set anew.
    pub(super) fn turn(self: &Rc<Self>) {
        self.pump();
        self.rearm();
    }

    /// Nothing may call into JS any more: its promise is never settled, its
    /// alarm is dropped (a reply still owed finds no promise).
    pub(super) fn forget(&self) {
        let _never_settled = self.deferred.take();
        if let Some(key) = self.alarm.take() {
            self.reactor.disarm(key);
        }
    }
}
