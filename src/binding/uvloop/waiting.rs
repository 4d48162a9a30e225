//! This thread's acquisitions that wait (their turn in a key's line, a
//! release notice, a pause): a table by id, where a wake queued from
//! another thread, or its client's `close()` or end, finds its acquisition.
//! An acquisition that wins at its first attempt never enters it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use napi::bindgen_prelude::within_runtime_if_available;

use super::acquire::Driving;
use crate::binding::lock::ById;

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
