//! One renewal scheduler per client, on tokio: it decides *when*, and leaves
//! *how* to its [`Renewer`] (see `renew.rs`). Locks due for renewal go out
//! together, as one batch; a lock whose local deadline passes without a
//! successful renewal is handed back as expired.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::core::base;
use crate::core::base::{from_us, later, to_us};
use crate::core::engine::lock::{LockState, Status};

/// What the scheduler drives: it owns the watchdog and acts on its verdicts.
pub trait Renewer: Send + Sync + 'static {
    fn watchdog(&self) -> &Watchdog;
    /// A lock's deadline passed without a successful renewal.
    fn expired(self: &Arc<Self>, state: &Arc<LockState>);
    /// Renews a batch; must report each lock with [`Watchdog::done`].
    fn renew(self: Arc<Self>, batch: Vec<Arc<LockState>>) -> impl Future<Output = ()> + Send;
}

/// A watched lock's place in the schedule: when it is due (µs, see
/// [`to_us`]) and its id.
type Place = (u64, u64);

/// A watched lock, kept in the schedule at its place.
struct Slot {
    state: Arc<LockState>,
    /// Its next renewal (µs).
    next_renew: u64,
    /// A renewal of it is out.
    in_flight: bool,
}

impl Slot {
    /// When the scheduler must look at it next: its renewal, or its
    /// deadline (while a renewal is out, or when it is not renewed).
    fn due(&self, now: Instant) -> u64 {
        let deadline = to_us(self.state.deadline());
        if self.in_flight || !self.state.renewable(now) {
            deadline
        } else {
            self.next_renew.min(deadline)
        }
    }
}

/// The watched locks in the order they are due, one map (a million held
/// locks cost one B-tree entry each, and a pass takes only what is due).
/// A lock's place is kept in its state ([`LockState::watch_place`]), so it
/// is found without an index by id.
#[derive(Default)]
struct Schedule {
    queue: BTreeMap<Place, Slot>,
}

impl Schedule {
    fn insert(&mut self, slot: Slot, now: Instant) {
        let place = (slot.due(now).min(u64::MAX - 1), slot.state.id);
        slot.state.set_watch_place(place.0);
        self.queue.insert(place, slot);
    }

    fn remove(&mut self, state: &LockState) -> Option<Slot> {
        let at = state.watch_place()?;
        state.clear_watch_place();
        self.queue.remove(&(at, state.id))
    }

    /// (Re)places `state` in the queue by when it is due now, after `change`.
    fn requeue(&mut self, state: &LockState, now: Instant, change: impl FnOnce(&mut Slot)) {
        if let Some(mut slot) = self.remove(state) {
            change(&mut slot);
            self.insert(slot, now);
        }
    }
}

#[derive(Default)]
pub struct Watchdog {
    schedule: Mutex<Schedule>,
    wake: Arc<Notify>,
    /// When the scheduler plans to look next (0: it has not looked yet); a new
    /// entry due earlier wakes it.
    planned_us: AtomicU64,
    started: AtomicBool,
    stop: CancellationToken,
}

/// How soon a failed renewal is tried again while validity remains.
fn quick_retry(every: Duration) -> Duration {
    (every / 5).clamp(Duration::from_millis(5), Duration::from_millis(250))
}

impl Watchdog {
    /// Starts the scheduler task once; it holds its owner only weakly.
    pub fn start<R: Renewer>(&self, owner: &Arc<R>) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let started = crate::core::base::spawn(run(
            Arc::downgrade(owner),
            self.wake.clone(),
            self.stop.clone(),
        ));
        // No runtime left to run it (the environment ends): a later lock may
        // still find one.
        if !started {
            self.started.store(false, Ordering::Release);
        }
    }

    pub fn stop(&self) {
        self.stop.cancel();
    }

    pub fn watch(&self, state: Arc<LockState>) {
        // One interval after the lease began (its deadline less the TTL),
        // not after it was registered: an acquisition whose reply (or whose
        // connect) took long has that much less validity left to renew in.
        let now = Instant::now();
        let every = state.renew_every();
        let from_lease = state
            .deadline()
            .checked_sub(state.ttl().saturating_sub(every));
        let next_renew = match from_lease {
            Some(at) => at.min(later(now, every)),
            None => later(now, every),
        };
        let slot = Slot {
            state,
            next_renew: to_us(next_renew),
            in_flight: false,
        };
        let due = slot.due(now);
        {
            let mut schedule = base::lock(&self.schedule);
            schedule.remove(&slot.state);
            schedule.insert(slot, now);
        }
        // Waking the scheduler for every acquire would cost a task switch each;
        // only an entry due before its planned wake-up needs it.
        let planned = self.planned_us.load(Ordering::Acquire);
        if planned == 0 || due < planned {
            self.wake.notify_one();
        }
    }

    pub fn unwatch(&self, state: &LockState) {
        base::lock(&self.schedule).remove(state);
    }

    /// After a manual extend: the next renewal is one interval from now.
    pub fn reschedule(&self, state: &LockState) {
        let now = Instant::now();
        base::lock(&self.schedule).requeue(state, now, |slot| {
            slot.next_renew = to_us(later(now, slot.state.renew_every()));
        });
        self.wake.notify_one();
    }

    /// Every lock still watched (for close).
    pub fn drain(&self) -> Vec<Arc<LockState>> {
        let queue = std::mem::take(&mut base::lock(&self.schedule).queue);
        queue
            .into_values()
            .map(|slot| {
                slot.state.clear_watch_place();
                slot.state
            })
            .collect()
    }

    /// One pass: returns the locks to renew now, those past their deadline, and
    /// when to look again. Looks only at the entries due by now (and, once one
    /// is due, at those a quarter of an interval later, which ride along).
    fn scan(&self, now: Instant) -> (Vec<Arc<LockState>>, Vec<Arc<LockState>>, Instant) {
        let mut expired = Vec::new();
        let mut batch = Vec::new();
        let mut schedule = base::lock(&self.schedule);
        // Renewing a little early is harmless and keeps renewals in few,
        // large batches: once one lock is due, those due within a quarter of
        // their interval go with it.
        let mut horizon = to_us(now);
        let mut look_again = Vec::new();
        while let Some(entry) = schedule.queue.first_entry() {
            if entry.key().0 > horizon {
                break;
            }
            let mut slot = entry.remove();
            slot.state.clear_watch_place();
            if slot.state.status() != Status::Held {
                continue;
            }
            if now >= slot.state.deadline() {
                expired.push(slot.state);
                continue;
            }
            let ride = later(now, slot.state.renew_every() / 4);
            if !slot.in_flight && slot.state.renewable(now) && slot.next_renew <= to_us(ride) {
                horizon = horizon.max(to_us(ride));
                slot.in_flight = true;
                batch.push(slot.state.clone());
            }
            // Not due after all (its deadline moved, or it rides along later):
            // back in line by when it is due now.
            look_again.push(slot);
        }
        for slot in look_again {
            schedule.insert(slot, now);
        }
        let next_wake = schedule
            .queue
            .first_key_value()
            .map_or(now + Duration::from_secs(3600), |(&(at, _), _)| {
                from_us(at).max(now)
            });
        // The loop sleeps until `next_wake` (a batch in flight nudges it when done).
        self.planned_us.store(to_us(next_wake), Ordering::Release);
        (batch, expired, next_wake)
    }

    /// Records a batch's outcome for one lock: the next renewal is a full
    /// interval after the batch was sent if it worked, soon if it did not.
    pub fn done(&self, state: &LockState, renewed: bool, sent_at: Instant) {
        let now = Instant::now();
        base::lock(&self.schedule).requeue(state, now, |slot| {
            slot.in_flight = false;
            let every = slot.state.renew_every();
            slot.next_renew = to_us(if renewed {
                later(sent_at, every)
            } else {
                now + quick_retry(every)
            });
        });
    }

    pub fn nudge(&self) {
        self.wake.notify_one();
    }
}

async fn run<R: Renewer>(owner: Weak<R>, wake: Arc<Notify>, stop: CancellationToken) {
    loop {
        let next_wake = {
            let Some(owner) = owner.upgrade() else {
                return;
            };
            let (batch, expired, next_wake) = owner.watchdog().scan(Instant::now());
            for state in expired {
                owner.expired(&state);
            }
            if !batch.is_empty() {
                tokio::spawn(owner.clone().renew(batch));
            }
            next_wake
        };
        tokio::select! {
            _ = tokio::time::sleep_until(next_wake.into()) => {}
            _ = wake.notified() => {}
            _ = stop.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::engine::lock::tests::held_for_test;

    /// A held lock `id` with a 3 s TTL renewed every second, valid for `valid_for`.
    fn lock(id: u64, valid_for: Duration) -> Arc<LockState> {
        Arc::new(held_for_test(
            id,
            valid_for,
            Duration::from_secs(3),
            Duration::from_secs(1),
        ))
    }

    #[test]
    fn a_pass_takes_what_is_due_and_those_that_ride_along_and_no_other() {
        let w = Watchdog::default();
        // Valid for 3 s: the first renewal one interval after the lease began (in ~1 s).
        for id in 0..10_000 {
            w.watch(lock(id, Duration::from_secs(3)));
        }
        let now = Instant::now();
        let (batch, expired, next) = w.scan(now);
        assert!(batch.is_empty() && expired.is_empty(), "nothing due yet");
        assert!(
            next > now + Duration::from_millis(900),
            "wakes when the first is due"
        );
        // At the first due time every lock goes (all within a quarter interval).
        let (batch, expired, next) = w.scan(now + Duration::from_millis(1010));
        assert_eq!(batch.len(), 10_000);
        assert!(expired.is_empty());
        // While they are out, the next look is at their deadline, not sooner.
        assert!(
            next >= now + Duration::from_millis(2900),
            "{:?}",
            next - now
        );
        let (again, _, _) = w.scan(now + Duration::from_millis(1500));
        assert!(
            again.is_empty(),
            "a lock with a renewal out is not sent twice"
        );
        // Renewed: due again one interval after its batch was sent.
        let sent = now + Duration::from_millis(1010);
        for s in &batch {
            s.set_deadline(sent + Duration::from_secs(3));
            w.done(s, true, sent);
        }
        let (none, _, next) = w.scan(now + Duration::from_millis(1600));
        assert!(none.is_empty());
        assert!(
            next >= sent + Duration::from_millis(990),
            "{:?}",
            next - sent
        );
    }

    #[test]
    fn a_lock_past_its_deadline_is_handed_back_even_with_its_renewal_out() {
        let w = Watchdog::default();
        let s = lock(1, Duration::from_millis(1200));
        w.watch(s.clone());
        let now = Instant::now();
        let (batch, _, _) = w.scan(now + Duration::from_millis(1100));
        assert_eq!(batch.len(), 1, "due, and sent");
        let (_, expired, _) = w.scan(now + Duration::from_millis(1300));
        assert_eq!(
            expired.len(),
            1,
            "its deadline passed while the renewal was out"
        );
        assert!(w.drain().is_empty(), "no longer watched");
    }

    #[test]
    fn unwatched_and_rescheduled_locks_leave_or_move_in_the_queue() {
        let w = Watchdog::default();
        let (a, b) = (
            lock(1, Duration::from_secs(3)),
            lock(2, Duration::from_secs(3)),
        );
        w.watch(a.clone());
        w.watch(b.clone());
        w.unwatch(&a);
        let now = Instant::now();
        let (batch, _, _) = w.scan(now + Duration::from_millis(1100));
        assert_eq!(batch.iter().map(|s| s.id).collect::<Vec<_>>(), [2]);
        w.done(&b, true, now + Duration::from_millis(1100));
        // A manual extend moves the next renewal to an interval from now
        // (earlier than the one the renewal set).
        w.reschedule(&b);
        let (batch, _, _) = w.scan(now + Duration::from_millis(500));
        assert!(batch.is_empty());
        let (batch, _, _) = w.scan(now + Duration::from_millis(1300));
        assert_eq!(batch.len(), 1);
        assert_eq!(w.drain().len(), 1);
    }
}
