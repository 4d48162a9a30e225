//! What an acquisition is in between events: its phase and its state.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;

use super::decide::Bounds;
use super::{Event, Outcome, Plan, Purpose, Transmit};
use crate::core::error::LockError;
use crate::core::model::Token;
use crate::core::ops::acquire::Acquire;
use crate::core::ops::permits::SlotReply;

/// One flag per node, inline for up to eight nodes.
pub(crate) type Flags = smallvec::SmallVec<[bool; 8]>;

pub(super) enum Phase {
    /// Not begun: earlier callers of its client for the key have not had
    /// their first attempt answered yet ([`Acquisition::handle_turn`]).
    Turn,
    /// Attempt `n`, sent at `started`; `out[i]`: node `i` has not answered;
    /// `sent[i]`: the driver took its command.
    Attempt {
        n: u32,
        started: Instant,
        op: Acquire,
        out: Flags,
        sent: Flags,
        /// A Redlock semaphore's attempt: each node's reply as it came.
        slots: Vec<Option<SlotReply>>,
    },
    /// Attempt `n` lost and is retried: its undo must land first.
    Undo {
        n: u32,
        out: Flags,
        deadline: Instant,
        longest_pttl: Option<u64>,
    },
    /// Waiting to make attempt `n + 1` at `until` (sooner on a notice);
    /// `span`: how long a pause it is. With `n` 0 the caller waits behind
    /// earlier callers of its client before its first attempt. `woken`: a
    /// notice already ended it, and `until` is the random instant its
    /// attempt goes out at (see [`Acquisition::handle_notice`]).
    Pause {
        n: u32,
        until: Instant,
        span: Duration,
        woken: bool,
    },
    Done,
}

/// One acquisition; see the module docs.
pub struct Acquisition {
    pub(super) plan: Plan,
    pub(super) bounds: Bounds,
    pub(super) token: Token,
    pub(super) phase: Phase,
    pub(super) rng: SmallRng,
    /// In the order they go; mostly one at a time (one node), kept inline.
    pub(super) transmits: smallvec::SmallVec<[Transmit; 1]>,
    pub(super) events: VecDeque<Event>,
    pub(super) outcome: Option<Outcome>,
    /// The failure of the last attempt, for a wait that ends later (boxed:
    /// a contended attempt's, while an acquisition stays under 1 KiB).
    pub(super) last_failure: Option<Box<LockError>>,
    /// Release notices reach this acquisition.
    pub(super) listening: bool,
    /// Whether the attempt in flight was sent while notices were heard.
    pub(super) heard: bool,
    pub(super) asked_to_listen: bool,
    /// Its last attempt lost on several nodes though some of them granted
    /// it: another waiter split the vote.
    pub(super) split: bool,
    /// The won attempt, still taking the answers of the nodes that were out
    /// when it was decided (they come back as [`Event::Late`]), and how many are;
    /// none when every node had answered (boxed: a Redlock's, rarely).
    pub(super) won: Option<Box<(u32, Acquire, usize)>>,
    /// The last attempt that found it waiting in a fair line, and when it
    /// was sent: a hand-off after it makes it the holder.
    pub(super) in_line: Option<(u32, Instant)>,
    /// Commands it answered as timed out itself: the transport's own timeout
    /// for one of them, coming after, is the same fault, not a second one.
    pub(super) expired: Vec<(Purpose, usize)>,
}
