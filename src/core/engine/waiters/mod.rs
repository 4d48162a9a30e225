//! Waiting for a held lock without polling it: the callers of one client that wait for the same key
//! queue up in arrival order, and a release notice for that key (a Redis pub/sub message the
//! release script publishes) wakes the first of them only, so a release costs one acquire attempt,
//! not one per waiter. Waiters still retry on their own timers, so a lost notice or a crashed
//! holder costs time, never liveness.
//!
//! A fair lock's release hands the key to the first live waiter in the line kept in Redis and
//! announces it as `>token n`, n the number of that waiter's attempt that last renewed its place
//! (`>token n fence` when the waiter hands out fencing tokens: the fence counter's value the
//! hand-off set): only the waiter with that token is woken, and it holds the lock already if no
//! attempt of its own found it still waiting after attempt n (then the hand-off is stale).
//!
//! Before any of that, the callers of one client that acquire the same key are served in call order
//! from the very first call (a new client has no connection yet, and the runtime may run their
//! first attempts in any order): each takes an [`Arrival`] when it is called, sends its first
//! attempt only once every earlier caller's first attempt was answered (so it finds the key held by
//! the first of them), and takes its place in the queue by call order, not by when its attempt came
//! back. A waiter that finds earlier callers of its client already queued joins the queue behind
//! them without an attempt, and a retry timer that fires behind the first in line wakes the first
//! instead: nobody of one client overtakes an earlier caller, even when a notice is lost.
//!
//! [`Arrival`] is the line of callers in call order (in `engine/acquire.rs`, beside the request
//! that takes its place there, with the [`Waiters`] calls a caller's turn is judged by), `place.rs`
//! a waiter's place in a key's queue, `handoff.rs` a fair hand-off's notice; the queues themselves,
//! the release notices and the fair hand-offs are [`Waiters`], here.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::core::base;
use crate::core::model::keys::CHANNEL_PREFIX;

mod handoff;
mod place;
#[cfg(test)]
mod tests;

pub use crate::core::engine::acquire::Arrival;
use crate::core::engine::acquire::Line;
use handoff::Handoff;
pub use place::{Place, Waker};

#[derive(Default)]
pub(in crate::core::engine) struct Queue {
    pub(in crate::core::engine) places: VecDeque<Arc<Place>>,
    /// The token of the last release notice, so the copies of one release
    /// that each Redlock node publishes wake one waiter, not N.
    last_token: Option<String>,
    /// Set once every node delivers this key's release notices to the client.
    heard: Arc<AtomicBool>,
    /// The latest fair hand-offs to tokens not waiting here (yet): a waiter
    /// handed the key between its attempt's reply and joining finds it here.
    early: VecDeque<Handoff>,
}

/// How many recent hand-offs a queue remembers for waiters about to join.
const EARLY_HANDOFFS: usize = 16;

/// A map by lock key: a fast hash, seeded per process (keys may come from
/// a service's users).
type ByKey<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The waiting queues of one client, by stored key.
#[derive(Default)]
pub struct Waiters {
    pub(in crate::core::engine) queues: Mutex<ByKey<String, Queue>>,
    /// The callers acquiring each key that are not done yet, in call order
    /// (the key shared with their [`Arrival`]s).
    pub(in crate::core::engine) lines: Mutex<ByKey<Arc<str>, Line>>,
    pub(in crate::core::engine) next_arrival: AtomicU64,
    next_id: AtomicU64,
}

/// What [`Waiters::join`] did.
pub struct Joined {
    pub place: Arc<Place>,
    /// The queue for this key was just created: nobody in this client was
    /// subscribed to its release notices yet.
    pub first: bool,
    /// True once every node delivers this key's release notices (set by the
    /// first waiter's subscription): a release after that is heard.
    pub heard: Arc<AtomicBool>,
}

impl Waiters {
    /// Queues a waiter for `key` behind those already waiting.
    pub fn join(&self, key: &str) -> Joined {
        self.join_as(key, "")
    }

    /// [`Waiters::join`] for the waiter holding `token` (a hand-off names it).
    pub fn join_as(&self, key: &str, token: &str) -> Joined {
        self.join_in_turn(key, token, None)
    }

    /// [`Waiters::join_as`] for the caller that arrived `seq`-th
    /// ([`Arrival::seq`]): it goes ahead of later callers already queued.
    pub fn join_in_turn(&self, key: &str, token: &str, seq: Option<u64>) -> Joined {
        let seq = seq.unwrap_or_else(|| self.next_arrival.fetch_add(1, Ordering::Relaxed));
        let place = Arc::new(Place {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            seq,
            token: token.to_string(),
            notify: Notify::new(),
            woken: AtomicBool::new(false),
            handed: AtomicU64::new(0),
            handed_fence: AtomicI64::new(0),
            waker: Mutex::default(),
        });
        let mut queues = base::lock(&self.queues);
        let first = !queues.contains_key(key);
        let queue = queues.entry(key.to_string()).or_default();
        if let Some(i) = queue.early.iter().position(|h| h.to == token) {
            if let Some(handoff) = queue.early.remove(i) {
                handoff.deliver(&place);
            }
        }
        let at = queue
            .places
            .iter()
            .rposition(|p| p.seq < seq)
            .map_or(0, |i| i + 1);
        queue.places.insert(at, place.clone());
        Joined {
            place,
            first,
            heard: queue.heard.clone(),
        }
    }

    /// Takes a waiter out of the queue. A notice it had not acted on goes to
    /// the next waiter. True when nobody waits for `key` any more.
    pub fn leave(&self, key: &str, place: &Place) -> bool {
        let mut queues = base::lock(&self.queues);
        let Some(queue) = queues.get_mut(key) else {
            return true;
        };
        let was_head = queue.places.front().is_some_and(|s| s.id == place.id);
        queue.places.retain(|s| s.id != place.id);
        if queue.places.is_empty() {
            queues.remove(key);
            return true;
        }
        if was_head && place.woken.swap(false, Ordering::AcqRel) {
            if let Some(next) = queue.places.front() {
                next.wake();
            }
        }
        false
    }

    /// For a waiter whose retry timer fired: when another waiter is first in
    /// line for `key`, wakes that one (it tries next) and returns true.
    pub fn wake_first_instead(&self, key: &str, place: &Place) -> bool {
        let queues = base::lock(&self.queues);
        match queues.get(key).and_then(|q| q.places.front()) {
            Some(first) if first.id != place.id => {
                first.wake();
                true
            }
            _ => false,
        }
    }

    /// How many callers wait in the queue for `key`.
    pub fn queued(&self, key: &str) -> usize {
        base::lock(&self.queues)
            .get(key)
            .map_or(0, |q| q.places.len())
    }

    /// True while somebody waits for `key`.
    pub fn waiting(&self, key: &str) -> bool {
        base::lock(&self.queues).contains_key(key)
    }

    /// A release notice: `key` was released by the holder of `token`. Wakes
    /// the first waiter, once per release. A semaphore's release sends one
    /// notice per permit freed (`<token>#<n>`), and each wakes the first
    /// waiter not woken yet, so a release wakes as many waiters as it frees
    /// permits; a lock's notice only ever wakes the first in line.
    pub fn released(&self, key: &str, token: &str) {
        let mut queues = base::lock(&self.queues);
        let Some(queue) = queues.get_mut(key) else {
            return;
        };
        if let Some(notice) = token.strip_prefix('>') {
            // A fair hand-off: only its new holder is woken (if it waits here).
            let handoff = Handoff::parse(notice);
            if let Some(p) = queue.places.iter().find(|p| p.token == handoff.to) {
                handoff.deliver(p);
            } else {
                if queue.early.len() == EARLY_HANDOFFS {
                    queue.early.pop_front();
                }
                queue.early.push_back(handoff);
            }
            return;
        }
        // The undo of a waiter's own attempt (on several nodes, the nodes it
        // won while the quorum went to another owner) is no release of the
        // key's holder: waking on it would only repeat a losing attempt.
        let releaser = token.split('#').next().unwrap_or(token);
        if !releaser.is_empty() && queue.places.iter().any(|p| p.token == releaser) {
            return;
        }
        if queue.last_token.as_deref() == Some(token) {
            return;
        }
        queue.last_token = Some(token.to_string());
        let next = if token.contains('#') {
            queue
                .places
                .iter()
                .find(|p| !p.woken.load(Ordering::Acquire))
        } else {
            queue.places.front()
        };
        if let Some(next) = next {
            next.wake();
        }
    }

    /// The hand-off of `key` to `token`'s waiter by a fair lock's release,
    /// taken once: the attempt of that waiter it came after (0: unknown)
    /// and the fence it came with.
    pub fn handed_over(&self, key: &str, token: &str) -> Option<(u64, Option<i64>)> {
        base::lock(&self.queues).get(key).and_then(|q| {
            q.places.iter().find(|p| p.token == token).and_then(|p| {
                let after = p.handed.swap(0, Ordering::AcqRel);
                let fence = p.handed_fence.swap(0, Ordering::AcqRel);
                (after != 0).then_some((after, (fence > 0).then_some(fence)))
            })
        })
    }

    /// Handles one pub/sub message (channel, payload).
    pub fn on_message(&self, channel: &[u8], payload: &[u8]) {
        let (Ok(channel), Ok(token)) = (std::str::from_utf8(channel), std::str::from_utf8(payload))
        else {
            return;
        };
        if let Some(key) = channel.strip_prefix(CHANNEL_PREFIX) {
            self.released(key, token);
        }
    }
}
