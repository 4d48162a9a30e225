//! A fair lock's hand-off as its release announces it (see
//! `fair_release.lua`), and as the waiter it went to takes it.

use std::sync::atomic::Ordering;

use super::Place;

/// A fair lock's hand-off notice, `>token n [fence]` (the `>` stripped): the
/// waiter it went to, the attempt of that waiter it came after (0: unknown),
/// and the fence it came with (none without fencing).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Handoff {
    pub(super) to: String,
    after: u64,
    fence: Option<i64>,
}

impl Handoff {
    pub(super) fn parse(notice: &str) -> Handoff {
        let mut words = notice.split(' ');
        let to = words.next().unwrap_or_default().to_string();
        let after = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        let fence = words.next().and_then(|f| f.parse().ok()).filter(|&f| f > 0);
        Handoff { to, after, fence }
    }

    /// Leaves this hand-off with its waiter's place, and wakes it.
    pub(super) fn deliver(&self, place: &Place) {
        place
            .handed_fence
            .store(self.fence.unwrap_or(0), Ordering::Release);
        place.handed.store(self.after, Ordering::Release);
        place.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hand_off_notice_names_its_waiter_attempt_and_fence() {
        let read = |n| {
            let h = Handoff::parse(n);
            (h.to, h.after, h.fence)
        };
        assert_eq!(read("f:t 3 41"), ("f:t".to_string(), 3, Some(41)));
        assert_eq!(read("f:t 3"), ("f:t".to_string(), 3, None), "no fencing");
        assert_eq!(read("f:t 0"), ("f:t".to_string(), 0, None));
        assert_eq!(
            read("f:t"),
            ("f:t".to_string(), 0, None),
            "no attempt known"
        );
        assert_eq!(read("f:t x y"), ("f:t".to_string(), 0, None), "garbage");
        assert_eq!(
            read("f:t 2 0"),
            ("f:t".to_string(), 2, None),
            "never a fence of 0"
        );
        assert_eq!(read("f:t 2 -5"), ("f:t".to_string(), 2, None));
    }
}
