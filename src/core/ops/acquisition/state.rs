//! What an acquisition is in between events (its phase and its state),
//! what it reports ([`Event`]), how it ends ([`Outcome`]), and what it still
//! hears after moving on ([`Stragglers`]).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;

use super::decide::Bounds;
use super::{Acquire, Plan, Purpose, Transmit};
use crate::core::error::{LockError, NodeAnswer};
use crate::core::model::Keys;
use crate::core::model::Token;
use crate::core::ops::gather::{Answer, Progress};
use crate::core::ops::permits::SlotReply;
use crate::core::quorum::NodeAnswers;

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
    /// What it still hears after moving on.
    pub(super) late: Stragglers,
    /// The last attempt that found it waiting in a fair line, and when it
    /// was sent: a hand-off after it makes it the holder.
    pub(super) in_line: Option<(u32, Instant)>,
}

/// What an acquisition still hears after moving on: the won attempt's
/// answers from the nodes that were out when it was decided, and the
/// transport's own timeouts of commands it answered as timed out itself.
pub(super) struct Stragglers {
    /// The won attempt, still taking the answers of the nodes that were out
    /// when it was decided (they come back as [`Event::Late`]), and how many are;
    /// none when every node had answered (boxed: a Redlock's, rarely).
    pub(super) won: Option<Box<(u32, Acquire, usize)>>,
    /// Commands it answered as timed out itself: the transport's own timeout
    /// for one of them, coming after, is the same fault, not a second one.
    pub(super) expired: Vec<(Purpose, usize)>,
}

impl Stragglers {
    /// Node `node`'s `reply` to `purpose` at `now`, which the acquisition no
    /// longer waits for: a late answer of the won attempt, else only a
    /// node's fault to report (once: not the transport's timeout of a
    /// command it timed out itself), into `events`.
    pub(super) fn hear(
        &mut self,
        plan: &Plan,
        (node, purpose): (usize, Purpose),
        reply: Answer,
        now: Instant,
        events: &mut VecDeque<Event>,
    ) {
        if let (Some((n, op, out)), Purpose::Attempt(m)) = (self.won.as_deref_mut(), purpose) {
            if *n == m {
                if let Progress::Late {
                    node,
                    answer,
                    fault,
                    ..
                } = op.on_reply(node, reply, now, now)
                {
                    *out = out.saturating_sub(1);
                    events.extend(fault.map(|answer| Event::Fault { node, answer }));
                    events.push_back(Event::Late { node, answer });
                }
                return;
            }
        }
        if matches!(reply, Err(NodeAnswer::Timeout)) {
            if let Some(at) = self.expired.iter().position(|e| *e == (purpose, node)) {
                self.expired.swap_remove(at);
                return;
            }
        }
        let answer = match (purpose, reply) {
            (_, Err(answer)) => answer,
            (Purpose::Undo(_), Ok(r)) => plan.take.undo_answer(Ok(r), plan.keys.len()),
            // Whether a place was left or never there, nothing to report.
            (Purpose::Leave(_), Ok(_)) => return,
            (Purpose::Attempt(_), Ok(r)) => (plan.take.reader())(Ok(r)).0,
        };
        if answer.is_fault() {
            events.push_back(Event::Fault { node, answer });
        }
    }
}

impl Phase {
    /// The nodes an attempt or an undo still waits for, no longer waited for
    /// (their commands timed out), with what the commands were for.
    pub(super) fn expire(&mut self) -> Option<(Purpose, Flags)> {
        let (purpose, out) = match self {
            Phase::Attempt { n, out, .. } => (Purpose::Attempt(*n), out),
            Phase::Undo { n, out, .. } => (Purpose::Undo(*n), out),
            _ => return None,
        };
        let late = out.clone();
        out.iter_mut().for_each(|o| *o = false);
        Some((purpose, late))
    }
}

/// What the driver reports or counts; nothing it acts on.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A node failed to answer (an `'error'` event).
    Fault { node: usize, answer: NodeAnswer },
    /// Node `node` answered the won attempt after the outcome: the held
    /// lock's record of answers takes it.
    Late { node: usize, answer: NodeAnswer },
    /// An attempt found the key held by another owner.
    Contended,
    /// A release notice ended a pause.
    Woken,
    /// Contended on one key: release notices for it will shorten the waits
    /// once the driver listens for them (`Acquisition::listening`); joining
    /// the key's line lets the next caller of the client go.
    Listen,
    /// An attempt failed without joining the key's line (an outage, or no
    /// notices to wait for): the next caller of the client may try now.
    Answered,
}

/// A won attempt, for the engine to register as a held lock.
pub struct Won {
    /// The keys as stored.
    pub keys: Keys,
    pub token: Token,
    pub attempts: u32,
    /// When the winning attempt was sent: its validity is counted from here.
    pub started: Instant,
    /// Each node's answer to it (`Pending` for those still out: their
    /// answers come later as [`Event::Late`]).
    pub answers: NodeAnswers,
    /// The highest fence a node handed out (0 without fencing).
    pub fence: i64,
}

/// A fair lock's release handed its key to this waiter: after its attempt
/// number `after` (0: unknown), with `fence` (none without fencing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handoff {
    pub after: u64,
    pub fence: Option<i64>,
}

/// How an acquisition ended.
pub enum Outcome {
    Won(Won),
    Failed(LockError),
}

/// Why a caller stops waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// Its signal aborted.
    Aborted,
    /// The client was closed.
    Closed,
}
