//! Semaphores and fair lines: the calls of a semaphore's, a read-write
//! lock's and a fair line's scripts, and how their replies read.

use super::gather::{counted, unexpected, Answer, Reply};
use crate::core::broken;
use crate::core::error::NodeAnswer;
use crate::core::model::keys;
use crate::core::model::{line_keys, FairLease, Permits, PermitsLease};
use crate::core::ops::call::Call;
use crate::core::ops::scripts;

/// The semaphore's acquire script for `lease`: `p.permits` of `p.limit`
/// (a read-write lock's reader or writer by `p.kind`).
pub fn call(lease: &PermitsLease<'_>, p: Permits) -> Call<'static> {
    let mut call = Call::new(&scripts::SEM_ACQUIRE);
    call.key(lease.key);
    call.key(lease.writer)
        .arg(lease.token)
        .arg(lease.ttl_ms)
        .arg(broken::sem_limit(p.limit))
        .arg(p.permits)
        .arg(p.kind_code())
        .arg(lease.mark_ms);
    call
}

/// The fair lock's script for `lease`: the key is taken at the head of its
/// line (or found handed over already), with the next fence when
/// `lease.fence` names the counter; otherwise the place is kept or renewed.
pub fn fair_call(lease: &FairLease<'_>) -> Call<'static> {
    let mut call = Call::new(&scripts::FAIR_ACQUIRE);
    call.key(lease.key);
    call.key(&lease.line[0]);
    if let Some(fence) = lease.fence {
        call.key(fence);
    }
    call.arg(lease.token)
        .arg(lease.ttl_ms)
        .arg(lease.place_ms)
        .arg(lease.attempt);
    call
}

/// The fair semaphore's script for `lease`: `limit` permits in all, taken
/// only when they fit beside those of every earlier waiter.
pub fn fair_permits_call(lease: &FairLease<'_>, limit: u32) -> Call<'static> {
    let mut call = Call::new(&scripts::FAIR_SEM_ACQUIRE);
    call.key(lease.key);
    call.key(&lease.line[0])
        .key(&lease.line[1])
        .arg(lease.token)
        .arg(lease.ttl_ms)
        .arg(broken::sem_limit(limit))
        .arg(lease.place_ms);
    call
}

/// A fair lock's release: the key goes to the first live waiter in line (or
/// is deleted when nobody waits), announced on `channel_prefix` (empty: no
/// notice); with `leave`, a caller that does not hold it leaves the line.
pub fn fair_release_call(
    key: &str,
    token: &str,
    channel_prefix: &str,
    leave: bool,
) -> Call<'static> {
    let mut call = Call::new(&scripts::FAIR_RELEASE);
    call.key(key);
    call.key(&line_keys(key)[0])
        .key(keys::fence_key(key))
        .arg(token)
        .arg(channel_prefix)
        .arg(if leave { "1" } else { "0" });
    call
}

/// Takes `token`'s place out of the fair line of a semaphore's `key`.
pub fn leave_call(key: &str, token: &str) -> Call<'static> {
    let line = line_keys(key);
    let mut call = Call::new(&scripts::FAIR_LEAVE);
    call.key(&line[0]);
    call.key(&line[1]).arg(token);
    call
}

/// The Redlock semaphore's script (see `sem_slots.lua`) for attempt
/// `token`: `p.permits` of `p.limit` numbered slots, the free ones tried from
/// `first` on, in the same order on every node.
pub fn slots_call(key: &str, token: &str, ttl_ms: u64, p: Permits, first: u32) -> Call<'static> {
    let mut call = Call::new(&scripts::SEM_SLOTS);
    call.key(key);
    call.arg(token)
        .arg(ttl_ms)
        .arg(p.limit)
        .arg(p.permits)
        .arg(first);
    call
}

/// The undo of the Redlock semaphore attempt `token` (see `sem_undo.lua`):
/// every member it wrote at `key` but `keep` (the one it won with; empty:
/// none), the permits freed announced on `channel_prefix` (empty: none).
pub fn slots_undo_call(key: &str, token: &str, keep: &str, channel_prefix: &str) -> Call<'static> {
    let mut call = Call::new(&scripts::SEM_UNDO);
    call.key(key);
    call.arg(token).arg(keep).arg(channel_prefix);
    call
}

/// A slot attempt's undo: the number of members removed, or a fault.
pub fn slots_undone(reply: Answer) -> NodeAnswer {
    match reply {
        Ok(Reply::Int(_)) => NodeAnswer::Ok,
        Ok(reply) => unexpected(reply, "semaphore undo"),
        Err(answer) => answer,
    }
}

/// A Redlock semaphore's reply as one node's answer to an attempt (which
/// member a quorum granted is decided on every node's reply).
pub fn slots_answer(reply: Answer) -> (NodeAnswer, i64) {
    let answer = match slots(reply) {
        SlotReply::Granted(_) => NodeAnswer::Ok,
        SlotReply::Busy(wait) => NodeAnswer::Held { pttl_ms: wait },
        SlotReply::Failed(answer) => answer,
    };
    (answer, 0)
}

/// The fair semaphore's reply as an attempt reads it: taken or in line.
pub fn fair_permits_answer(reply: Answer) -> (NodeAnswer, i64) {
    (granted(reply, "fair semaphore"), 0)
}

/// The semaphore's acquire reply as an attempt reads it: taken or held,
/// with no fence.
pub fn attempt_answer(reply: Answer) -> (NodeAnswer, i64) {
    (granted(reply, "semaphore"), 0)
}

pub use crate::core::quorum::slots::SlotReply;

/// A `[1, …]` / `[0, wait]` reply (semaphore, fair lock, fair semaphore):
/// taken, or held with `wait` ms until it may be worth trying (or renewing
/// the place in line) again.
pub fn granted(reply: Answer, what: &str) -> NodeAnswer {
    let reply = match reply {
        Ok(reply) => reply,
        Err(answer) => return answer,
    };
    match reply.ints().as_deref() {
        Some([1, ..]) => NodeAnswer::Ok,
        Some([0, wait, ..]) => NodeAnswer::Held {
            pttl_ms: u64::try_from(*wait).ok(),
        },
        _ => unexpected(reply, what),
    }
}

/// The fair lock's reply, `[1, fence]` or `[0, wait, 1]`: read as
/// [`granted`], with the fence value beside it (0 unless taken with fencing).
pub fn fair_granted(reply: Answer) -> (NodeAnswer, i64) {
    let fence = match &reply {
        Ok(r) => match r.ints().as_deref() {
            Some([1, fence, ..]) => *fence,
            _ => 0,
        },
        Err(_) => 0,
    };
    (granted(reply, "fair-lock"), fence)
}

/// The Redlock semaphore's reply: `[1, _, member]` or `[0, wait]`.
pub fn slots(reply: Answer) -> SlotReply {
    let reply = match reply {
        Ok(reply) => reply,
        Err(answer) => return SlotReply::Failed(answer),
    };
    match &reply {
        Reply::Array(items) => match items.as_slice() {
            [Reply::Int(1), _, Reply::Bulk(member)] => match String::from_utf8(member.clone()) {
                Ok(member) => SlotReply::Granted(member),
                Err(_) => SlotReply::Failed(NodeAnswer::ErrorReply(
                    "semaphore member is not UTF-8".to_string().into(),
                )),
            },
            [Reply::Int(0), Reply::Int(wait), ..] => SlotReply::Busy(u64::try_from(*wait).ok()),
            _ => SlotReply::Failed(unexpected(reply, "semaphore")),
        },
        _ => SlotReply::Failed(unexpected(reply, "semaphore")),
    }
}

/// A fair lock's release: handed on (or deleted), or not ours.
pub fn fair_released(reply: Answer) -> NodeAnswer {
    counted(reply, 1, "fair release")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(values: &[i64]) -> Answer {
        Ok(Reply::Array(
            values.iter().map(|&v| Reply::Int(v)).collect(),
        ))
    }

    #[test]
    fn a_fair_lock_taken_carries_its_fence() {
        assert_eq!(fair_granted(ints(&[1, 7])), (NodeAnswer::Ok, 7));
        assert_eq!(
            fair_granted(ints(&[1, 0])),
            (NodeAnswer::Ok, 0),
            "no fencing"
        );
    }

    #[test]
    fn a_fair_waiter_in_line_has_no_fence() {
        assert_eq!(
            fair_granted(ints(&[0, 666, 1])),
            (NodeAnswer::Held { pttl_ms: Some(666) }, 0)
        );
        assert_eq!(
            fair_granted(ints(&[0, -1, 1])),
            (NodeAnswer::Held { pttl_ms: None }, 0),
            "a single attempt: no place to renew"
        );
    }

    #[test]
    fn a_fair_reply_that_fails_has_no_fence() {
        assert_eq!(
            fair_granted(Err(NodeAnswer::Timeout)),
            (NodeAnswer::Timeout, 0)
        );
        let (answer, fence) = fair_granted(Ok(Reply::Int(1)));
        assert_eq!((answer.kind(), fence), ("error", 0));
        let (answer, fence) = fair_granted(Ok(Reply::error("ERR", "boom")));
        assert_eq!(
            (answer, fence),
            (NodeAnswer::ErrorReply("ERR boom".into()), 0)
        );
    }
}
