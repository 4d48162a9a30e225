//! Semaphores and fair lines: a semaphore's or read-write lock's acquire
//! call, and how the replies of their scripts read (the fair calls are
//! built beside the leases they carry, in `node::fair`).

use super::reply::{counted, unexpected, Answer, Reply};
use crate::core::broken;
use crate::core::error::NodeAnswer;
use crate::core::model::{Permits, PermitsLease};
use crate::core::scripts::{self, Call};

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
