//! Continuing a lock by its token (handed over from another process, or kept
//! across a restart): one token-checked extend on every node → the renewal
//! verdict of `quorum/` → the lock joins the watchdog like any acquired one.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;

use crate::core::base::{later, ms_of};
use crate::core::engine::acquire::{self, Request};
use crate::core::engine::inner::Inner;
use crate::core::engine::lock::lost;
use crate::core::engine::lock::Lock;
use crate::core::engine::lock::{LockState, NewLock};
use crate::core::error::{LockError, NodeAnswer, Result};
use crate::core::model;
use crate::core::ops::Answers;
use crate::core::quorum::{self, Renewed, Tally};
use crate::core::transport::tokio::Renewal;

/// The longest token accepted: lockdog's own are 36 characters; other
/// libraries' values are short too, and a value this long is a mistake.
pub const MAX_TOKEN_BYTES: usize = 1024;

/// Checks a token given by the caller.
pub fn check_token(token: &str) -> Result<()> {
    if token.is_empty() {
        return Err(LockError::invalid_value("token", "must not be empty"));
    }
    if token.len() > MAX_TOKEN_BYTES {
        return Err(LockError::invalid_value(
            "token",
            &format!("must be at most {MAX_TOKEN_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// Takes over the lock on `request`'s keys that holds `token`: extends its
/// lease to the requested ttl only where every key still holds the token
/// (never creating a key), and on a quorum renews it from then on.
/// `ERR_LOCK_LOST` when the keys are gone or hold another token.
pub(crate) async fn adopt(inner: &Arc<Inner>, request: Request, token: String) -> Result<Lock> {
    let Request { names, spec, .. } = request;
    inner.ensure_accepting()?;
    let keys = model::prefixed(&inner.cfg.key_prefix, &names);
    let label = names.join(", ");
    let ttl = spec.ttl;
    let timeout = inner.cfg.node_timeout_for(ttl);
    let started = Instant::now();
    let renewal = [Renewal {
        keys: &keys,
        token: &token,
        ttl_ms: ms_of(ttl).max(1),
    }];
    let answers: Vec<NodeAnswer> = join_all(
        inner
            .nodes
            .iter()
            .map(|n| n.extend_batch(&renewal, timeout)),
    )
    .await
    .into_iter()
    .map(|mut a| a.remove(0))
    .collect();
    inner.report_faults(&answers);
    let t = Tally::of(&answers);
    let drift = inner.cfg.drift_for(ttl);
    let deadline = later(started, ttl.saturating_sub(drift));
    match quorum::renewed(&t, deadline > Instant::now()) {
        Renewed::Renewed => {}
        Renewed::TooLate => {
            return Err(lost(
                &label,
                "the adopting extend was answered too late to leave any validity",
            ))
        }
        Renewed::Lost => {
            return Err(lost(
                &label,
                "its key is gone or holds another token, so it cannot be adopted",
            )
            .with_nodes(inner.reports(&answers)))
        }
        Renewed::NoQuorum => {
            return Err(inner
                .no_quorum(&answers, || {
                    format!(
                        "adopt of \"{label}\": {} of {} nodes agreed, {} needed",
                        t.ok,
                        t.nodes,
                        t.needed()
                    )
                })
                .with_key(label.clone()))
        }
    }
    let kind = inner.stored_kind(&keys).await;
    let state = Arc::new(LockState::new(NewLock {
        id: crate::core::engine::lock::new_id(),
        keys,
        prefix_len: inner.cfg.key_prefix.len(),
        kind,
        token: token.into(),
        attempts: 1,
        deadline,
        ttl,
        renew_every: spec.renew_interval,
        hold_until: spec.max_hold.map(|h| later(started, h)),
        auto_renew: spec.auto_renew,
        fence: None,
        wait_replicas: spec.wait_replicas,
        // Each node's answer to the adopting extend (one held by another
        // owner says so), as an acquisition's answers are kept.
        answers: Answers::of(answers),
    }));
    inner.stats.held.fetch_add(1, Ordering::Relaxed);
    inner.watchdog.start(inner);
    inner.watchdog.watch(state.clone());
    acquire::unless_closed(inner, Lock::new(state, inner.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked() {
        assert!(check_token("").is_err());
        assert!(check_token(&"x".repeat(MAX_TOKEN_BYTES + 1)).is_err());
        assert!(check_token("0f8e2c4a-0000-4000-8000-000000000000").is_ok());
    }
}
