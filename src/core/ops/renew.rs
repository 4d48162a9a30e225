//! Renew: the watchdog's batch of locks on one node, one script call per
//! [`MAX_RENEWAL_KEYS`] keys (pipelined), one answer per lock.

use std::ops::Range;

use super::gather::{unexpected, Answer, Reply};
use crate::core::error::NodeAnswer;
use crate::core::ops::call::Call;
use crate::core::ops::scripts;

/// Most keys one renewal script touches: Redis runs a script without
/// interruption, so a larger batch is cut into several calls (pipelined).
pub const MAX_RENEWAL_KEYS: usize = 1_000;

/// What one node needs for a renewal inside a batch.
pub struct Renewal<'a> {
    pub keys: &'a [String],
    pub token: &'a str,
    pub ttl_ms: u64,
}

/// Cuts a batch into runs of whole locks of at most [`MAX_RENEWAL_KEYS`] keys
/// (a lock with more keys than that runs alone).
pub fn chunks(batch: &[Renewal<'_>]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut keys = 0;
    for (i, r) in batch.iter().enumerate() {
        if i > start && keys + r.keys.len() > MAX_RENEWAL_KEYS {
            out.push(start..i);
            start = i;
            keys = 0;
        }
        keys += r.keys.len();
    }
    if start < batch.len() {
        out.push(start..batch.len());
    }
    out
}

/// One call of the renewal script for `locks`: their keys in order, then the
/// lock count and (key count, token, ttl) per lock.
pub fn call(locks: &[Renewal<'_>]) -> Call<'static> {
    let mut call = Call::new(&scripts::RENEW);
    for r in locks {
        call.key(r.keys);
    }
    call.arg(locks.len());
    for r in locks {
        call.arg(r.keys.len()).arg(r.token).arg(r.ttl_ms);
    }
    call
}

/// One answer per lock from a renewal script's reply for `locks` locks.
pub fn answers(reply: Answer, locks: usize) -> Vec<NodeAnswer> {
    match reply {
        Ok(Reply::Array(items)) if items.len() == locks => items
            .into_iter()
            .map(|item| match item {
                Reply::Int(1) => NodeAnswer::Ok,
                Reply::Int(0) => NodeAnswer::NotHeld,
                other => NodeAnswer::ErrorReply(format!("the renewal failed ({other:?})").into()),
            })
            .collect(),
        Ok(other) => vec![unexpected(other, "renewal"); locks],
        Err(answer) => vec![answer; locks],
    }
}
