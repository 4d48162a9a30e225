//! The waiting queues, the line of arrivals and the fair hand-offs.

use super::*;
use crate::core::model::keys::channel;
use std::time::Duration;

impl Waiters {
    /// True while `place` is first in line for `key`.
    fn is_head(&self, key: &str, place: &Place) -> bool {
        base::lock(&self.queues)
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
async fn the_undo_of_a_waiters_own_attempt_wakes_nobody() {
    let w = Waiters::default();
    let a = w.join_as("k", "ta");
    let b = w.join_as("k", "5:tb");
    w.released("k", "ta");
    w.released("k", "5:tb#1");
    assert!(!is_woken(&a.place).await, "its own token's notice");
    assert!(
        !is_woken(&b.place).await,
        "a permit notice of its own token"
    );
    w.released("k", "holder");
    assert!(
        is_woken(&a.place).await,
        "the holder's release still wakes it"
    );
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
    w.released("k", ">tb 2");
    assert!(!is_woken(&a.place).await);
    assert!(is_woken(&b.place).await);
    assert_eq!(w.handed_over("k", "ta"), None);
    assert_eq!(w.handed_over("k", "tb"), Some((2, None)));
    assert_eq!(w.handed_over("k", "tb"), None, "taken once");
    // Handed the key just before joining: it is woken as it joins.
    w.released("k", ">tc 1");
    let c = w.join_as("k", "tc");
    assert!(is_woken(&c.place).await);
    assert_eq!(w.handed_over("k", "tc"), Some((1, None)));
    w.released("k", ">gone 1");
    assert!(
        !is_woken(&a.place).await,
        "a hand-off to nobody here wakes nobody"
    );
    // After no attempt it knows of: nothing to take (the next attempt tells).
    w.released("k", ">ta 0");
    assert!(is_woken(&a.place).await);
    assert_eq!(w.handed_over("k", "ta"), None);
}

#[tokio::test]
async fn a_hand_off_carries_its_fence_to_the_new_holder() {
    let w = Waiters::default();
    let a = w.join_as("k", "ta");
    w.released("k", ">ta 1 17");
    assert!(is_woken(&a.place).await);
    assert_eq!(w.handed_over("k", "ta"), Some((1, Some(17))));
    assert_eq!(w.handed_over("k", "ta"), None, "taken once");
    // A later hand-off without a fence does not keep the old one.
    w.released("k", ">ta 1");
    assert_eq!(w.handed_over("k", "ta"), Some((1, None)));
    // Handed over (with its fence) just before joining.
    w.released("k", ">tb 1 18");
    let b = w.join_as("k", "tb");
    assert!(is_woken(&b.place).await);
    assert_eq!(w.handed_over("k", "tb"), Some((1, Some(18))));
}

#[tokio::test]
async fn callers_go_in_call_order_and_queue_by_it() {
    let w = Arc::new(Waiters::default());
    let a = w.arrive("k");
    let b = w.arrive("k");
    let c = w.arrive("k");
    let other = w.arrive("j");
    assert!(a.may_go() && other.may_go());
    assert!(!b.may_go() && !c.may_go(), "behind an attempt still out");
    assert!(tokio::time::timeout(Duration::from_millis(20), b.turn())
        .await
        .is_err());
    a.answered();
    assert!(b.may_go() && !c.may_go());
    // c's attempt comes back before b's: c still queues behind b.
    drop(a);
    let qc = w.join_in_turn("k", "", Some(c.seq()));
    let qb = w.join_in_turn("k", "", Some(b.seq()));
    w.released("k", "t1");
    assert!(is_woken(&qb.place).await);
    assert!(!is_woken(&qc.place).await);
    // A caller that is done lets the next one go at once.
    drop(b);
    tokio::time::timeout(Duration::from_millis(500), c.turn())
        .await
        .expect("c's turn");
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
