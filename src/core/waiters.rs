//! Waiting for a held lock without polling it: the callers of one client that
//! wait for the same key queue up in arrival order, and a release notice for
//! that key (a Redis pub/sub message the release script publishes) wakes the
//! first of them only, so a release costs one acquire attempt, not one per
//! waiter. Waiters still retry on their own timers, so a lost notice or a
//! crashed holder costs time, never liveness.
//!
//! A fair lock's release hands the key to the first live waiter in the line
//! kept in Redis and announces it as `>token n`, n the number of that
//! waiter's attempt that last renewed its place: only the waiter with that
//! token is woken, and it holds the lock already if no attempt of its own
//! found it still waiting after attempt n (then the hand-off is stale).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Notify;

use crate::core::broken;
use crate::core::keys::CHANNEL_PREFIX;
use crate::core::sync;
use crate::core::time::wait_until;

/// One waiting caller's place in a key's queue.
pub struct Place {
    id: u64,
    /// The waiter's token (fair locks: a hand-off names it); empty otherwise.
    token: String,
    notify: Notify,
    /// Woken and not yet acted on; handed to the next waiter if this one leaves.
    woken: AtomicBool,
    /// A fair lock's release handed the key to this waiter after its attempt
    /// number `handed` (0: none).
    handed: AtomicU64,
}

impl Place {
    /// Completes when a release notice reaches this waiter (at once if one
    /// already did and was not consumed).
    pub async fn woken(&self) {
        wait_until(&self.notify, || self.woken.swap(false, Ordering::AcqRel)).await
    }

    /// Consumes a pending notice, if any (the caller is about to try anyway).
    pub fn consume(&self) {
        self.woken.store(false, Ordering::Release);
    }

    fn wake(&self) {
        self.woken.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }
}

/// A fair waiter's attempts.
#[derive(Default)]
struct FairWait {
    /// Attempts numbered so far.
    attempts: u64,
    /// The latest attempt that found the waiter still waiting: its number and
    /// when it was sent.
    waiting: Option<(u64, Instant)>,
}

#[derive(Default)]
struct Queue {
    places: VecDeque<Arc<Place>>,
    /// The token of the last release notice, so the copies of one release
    /// that each Redlock node publishes wake one waiter, not N.
    last_token: Option<String>,
    /// Set once every node delivers this key's release notices to the client.
    heard: Arc<AtomicBool>,
    /// The latest fair hand-offs to tokens not waiting here (yet): a waiter
    /// handed the key between its attempt's reply and joining finds it here.
    early: VecDeque<(String, u64)>,
}

/// How many recent hand-offs a queue remembers for waiters about to join.
const EARLY_HANDOFFS: usize = 16;

/// The waiting queues of one client, by stored key.
#[derive(Default)]
pub struct Waiters {
    queues: Mutex<HashMap<String, Queue>>,
    next_id: AtomicU64,
    /// Fair waiters by token.
    fair: Mutex<HashMap<String, FairWait>>,
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
        let place = Arc::new(Place {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            token: token.to_string(),
            notify: Notify::new(),
            woken: AtomicBool::new(false),
            handed: AtomicU64::new(0),
        });
        let mut queues = sync::lock(&self.queues);
        let first = !queues.contains_key(key);
        let queue = queues.entry(key.to_string()).or_default();
        if let Some(i) = queue.early.iter().position(|(t, _)| t == token) {
            if let Some((_, after)) = queue.early.remove(i) {
                place.handed.store(after, Ordering::Release);
                place.wake();
            }
        }
        queue.places.push_back(place.clone());
        Joined {
            place,
            first,
            heard: queue.heard.clone(),
        }
    }

    /// Takes a waiter out of the queue. A notice it had not acted on goes to
    /// the next waiter. True when nobody waits for `key` any more.
    pub fn leave(&self, key: &str, place: &Place) -> bool {
        let mut queues = sync::lock(&self.queues);
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

    /// True while somebody waits for `key`.
    pub fn waiting(&self, key: &str) -> bool {
        sync::lock(&self.queues).contains_key(key)
    }

    /// A release notice: `key` was released by the holder of `token`. Wakes
    /// the first waiter, once per release. A semaphore's release sends one
    /// notice per permit freed (`<token>#<n>`), and each wakes the first
    /// waiter not woken yet, so a release wakes as many waiters as it frees
    /// permits; a lock's notice only ever wakes the first in line.
    pub fn released(&self, key: &str, token: &str) {
        let mut queues = sync::lock(&self.queues);
        let Some(queue) = queues.get_mut(key) else {
            return;
        };
        if let Some(handoff) = token.strip_prefix('>') {
            // A fair hand-off: only its new holder is woken (if it waits here).
            let (to, after) = handoff.split_once(' ').unwrap_or((handoff, ""));
            let after = after.parse().unwrap_or(0);
            if let Some(p) = queue.places.iter().find(|p| p.token == to) {
                p.handed.store(after, Ordering::Release);
                p.wake();
            } else {
                if queue.early.len() == EARLY_HANDOFFS {
                    queue.early.pop_front();
                }
                queue.early.push_back((to.to_string(), after));
            }
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

    /// The number of `token`'s next fair attempt (from 1).
    pub fn next_attempt(&self, token: &str) -> u64 {
        let mut fair = sync::lock(&self.fair);
        let w = fair.entry(token.to_string()).or_default();
        w.attempts += 1;
        w.attempts
    }

    /// `token`'s fair attempt number `n`, sent at `at`, found it still waiting.
    pub fn still_waiting(&self, token: &str, n: u64, at: Instant) {
        let mut fair = sync::lock(&self.fair);
        let w = fair.entry(token.to_string()).or_default();
        if w.waiting.is_none_or(|(m, _)| m < n) {
            w.waiting = Some((n, at));
        }
    }

    /// When a fair lock's release handed `key` to `token`'s waiter (taken
    /// once): the hand-off came after its attempt that was sent then, and
    /// before any later attempt ran. `None` when no hand-off came, or when an
    /// attempt found the waiter still waiting after it (a stale hand-off).
    pub fn handed_over(&self, key: &str, token: &str) -> Option<Instant> {
        let after = sync::lock(&self.queues).get(key).and_then(|q| {
            q.places
                .iter()
                .find(|p| p.token == token)
                .map(|p| p.handed.swap(0, Ordering::AcqRel))
        })?;
        match sync::lock(&self.fair).get(token)?.waiting {
            Some((n, at)) if after != 0 && (n == after || broken::trusts_stale_handoffs()) => {
                Some(at)
            }
            _ => None,
        }
    }

    /// `token`'s fair wait is over.
    pub fn done_waiting(&self, token: &str) {
        sync::lock(&self.fair).remove(token);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::keys::channel;
    use std::time::Duration;

    impl Waiters {
        /// True while `place` is first in line for `key`.
        fn is_head(&self, key: &str, place: &Place) -> bool {
            sync::lock(&self.queues)
                .get(key)
                .and_then(|q| q.places.front())
                .is_some_and(|s| s.id == place.id)
        }
    }

    async fn is_woken(place: &Place) -> bool {
        tokio::time::timeout(Duration::from_millis(20), place.woken())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_release_wakes_the_first_waiter_only_once_per_token() {
        let w = Waiters::default();
        let a = w.join("k");
        let b = w.join("k");
        assert!(a.first);
        assert!(!b.first);
        assert!(w.is_head("k", &a.place));
        w.released("k", "t1");
        w.released("k", "t1"); // the same release from a second node
        assert!(is_woken(&a.place).await);
        assert!(!is_woken(&b.place).await);
        assert!(!is_woken(&a.place).await, "one notice, one wake-up");
        assert!(!w.leave("k", &a.place));
        assert!(w.is_head("k", &b.place));
        assert!(
            !is_woken(&b.place).await,
            "a consumed notice is not handed on"
        );
        w.released("k", "t2");
        assert!(is_woken(&b.place).await);
        assert!(w.leave("k", &b.place), "the queue is empty");
        assert!(!w.waiting("k"));
    }

    #[tokio::test]
    async fn notices_of_several_freed_permits_wake_as_many_waiters() {
        let w = Waiters::default();
        let a = w.join("k");
        let b = w.join("k");
        let c = w.join("k");
        w.released("k", "2:t#1");
        w.released("k", "2:t#2");
        assert!(is_woken(&a.place).await);
        assert!(is_woken(&b.place).await);
        assert!(!is_woken(&c.place).await);
        // A lock's notices wake the first in line only, however many come.
        w.released("k", "t3");
        w.released("k", "t4");
        assert!(!is_woken(&c.place).await);
    }

    #[tokio::test]
    async fn a_head_that_leaves_hands_its_notice_on() {
        let w = Waiters::default();
        let a = w.join("k");
        let b = w.join("k");
        w.released("k", "t1");
        assert!(!w.leave("k", &a.place));
        assert!(is_woken(&b.place).await);
    }

    #[tokio::test]
    async fn a_hand_off_wakes_its_new_holder_only() {
        let w = Waiters::default();
        let a = w.join_as("k", "ta");
        let b = w.join_as("k", "tb");
        let at = Instant::now();
        assert_eq!(w.next_attempt("tb"), 1);
        assert_eq!(w.next_attempt("tb"), 2);
        w.still_waiting("tb", 2, at);
        w.released("k", ">tb 2");
        assert!(!is_woken(&a.place).await);
        assert!(is_woken(&b.place).await);
        assert_eq!(w.handed_over("k", "ta"), None);
        assert_eq!(w.handed_over("k", "tb"), Some(at));
        assert_eq!(w.handed_over("k", "tb"), None, "taken once");
        // A hand-off after attempt 2 that attempt 3 found void: stale.
        w.released("k", ">tb 2");
        assert_eq!(w.next_attempt("tb"), 3);
        w.still_waiting("tb", 3, Instant::now());
        assert_eq!(w.handed_over("k", "tb"), None);
        w.done_waiting("tb");
        // Handed the key just before joining: it is woken as it joins.
        w.released("k", ">tc 1");
        let c = w.join_as("k", "tc");
        assert!(is_woken(&c.place).await);
        w.still_waiting("tc", 1, at);
        assert_eq!(w.handed_over("k", "tc"), Some(at));
        w.released("k", ">gone 1");
        assert!(
            !is_woken(&a.place).await,
            "a hand-off to nobody here wakes nobody"
        );
    }

    #[tokio::test]
    async fn notices_for_other_keys_and_channels_are_ignored() {
        let w = Waiters::default();
        let a = w.join("k");
        w.on_message(b"other", b"t");
        w.on_message(channel("j").as_bytes(), b"t");
        assert!(!is_woken(&a.place).await);
        w.on_message(channel("k").as_bytes(), b"t");
        assert!(is_woken(&a.place).await);
    }
}
