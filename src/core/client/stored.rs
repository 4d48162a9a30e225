//! Looking at or clearing lock keys without holding them: inspect, forced
//! release, release by token, the semaphore's count, the local line (the
//! bodies of the [`Client`] methods of those names).

use std::sync::Arc;

use futures_util::future::join_all;

#[cfg(doc)]
use super::Client;
use crate::core::engine::inner::Inner;
use crate::core::engine::semaphore;
use crate::core::error::{NodeAnswer, NodeReport, Result};
use crate::core::model::keys::fence_key;
use crate::core::model::{self, lock_keys};
use crate::core::quorum::{self, Released, Tally};

#[derive(Debug, Clone)]
pub struct Inspection {
    /// A quorum of nodes holds the key with one value.
    pub held: bool,
    /// The shortest remaining TTL of that value, in ms.
    pub remaining_ms: Option<u64>,
    /// The holder's token, masked (its first 8 characters).
    pub holder: Option<String>,
    /// The highest fence counter seen (fencing clients only).
    pub fence: Option<i64>,
    pub nodes: Vec<NodeReport>,
}

fn mask(token: &str) -> String {
    let shown: String = token.chars().take(8).collect();
    format!("{shown}…")
}

/// What a release by token came to: `released` when a quorum of nodes
/// deleted keys holding the token; each node's answer.
#[derive(Debug, Clone)]
pub struct TokenRelease {
    pub released: bool,
    pub nodes: Vec<NodeReport>,
}

/// [`Client::release_token`].
pub(super) async fn release_token(
    inner: &Inner,
    names: &[String],
    token: &str,
) -> Result<TokenRelease> {
    let keys = model::prefixed(&inner.cfg.key_prefix, names);
    let timeout = inner.cfg.command_timeout;
    let kind = inner.stored_kind(&keys).await;
    let answers = join_all(
        inner
            .nodes
            .iter()
            .map(|n| n.release(&keys, token, kind, None, timeout)),
    )
    .await;
    inner.report_faults(&answers);
    Ok(TokenRelease {
        released: quorum::released(&Tally::of(&answers)) == Released::Released,
        nodes: inner.reports(&answers),
    })
}

/// [`Client::waiting`].
pub(super) fn waiting(inner: &Inner, name: &str) -> usize {
    let key = format!("{}{name}", inner.cfg.key_prefix);
    inner.waiters.queued(&key)
}

/// [`Client::count_permits`].
pub(super) async fn count_permits(inner: &Arc<Inner>, name: &str) -> Result<semaphore::Count> {
    let key = stored_key(inner, name)?;
    semaphore::count_permits(inner, &key, name).await
}

/// The stored key for one lock name.
fn stored_key(inner: &Inner, name: &str) -> Result<String> {
    let name = lock_keys(vec![name.to_string()])?.remove(0);
    Ok(format!("{}{name}", inner.cfg.key_prefix))
}

/// [`Client::inspect`].
pub(super) async fn inspect(inner: &Inner, name: &str) -> Result<Inspection> {
    inner.ensure_open()?;
    let key = stored_key(inner, name)?;
    let fence = fence_key(&key);
    let timeout = inner.cfg.command_timeout;
    let replies = join_all(inner.nodes.iter().map(|n| n.inspect(&key, &fence, timeout))).await;
    let mut answers = Vec::with_capacity(replies.len());
    let mut values: Vec<(String, i64)> = Vec::new();
    let mut fences = Vec::new();
    for reply in replies {
        match reply {
            Ok((value, pttl, f)) => {
                if let Some(v) = value {
                    values.push((v, pttl));
                }
                fences.extend(f);
                answers.push(NodeAnswer::Ok);
            }
            Err(answer) => answers.push(answer),
        }
    }
    if !quorum::reached(&answers) {
        return Err(inner
            .no_quorum(&answers, || {
                "too few nodes answered the inspection".to_string()
            })
            .with_key(name));
    }
    let held = quorum::holder(&values, answers.len());
    Ok(Inspection {
        held: held.is_some(),
        remaining_ms: held.and_then(|(_, pttl)| u64::try_from(pttl).ok()),
        holder: held.map(|(v, _)| mask(v)),
        fence: fences.into_iter().max(),
        nodes: inner.reports(&answers),
    })
}

/// [`Client::force_release`].
pub(super) async fn force_release(inner: &Inner, name: &str) -> Result<usize> {
    inner.ensure_open()?;
    let key = stored_key(inner, name)?;
    let timeout = inner.cfg.command_timeout;
    let answers = join_all(inner.nodes.iter().map(|n| n.force_delete(&key, timeout))).await;
    // Deleted on some nodes but unknown on a majority: say so rather than
    // report a count that cannot tell "absent" from "unreachable".
    if !quorum::reached(&answers) {
        let answered = answers.iter().filter(|a| !a.is_fault()).count();
        return Err(inner
            .no_quorum(&answers, || {
                format!(
                    "the forced release of \"{name}\" reached {answered} of {} nodes, {} needed",
                    answers.len(),
                    quorum::needed(answers.len())
                )
            })
            .with_key(name));
    }
    Ok(answers.iter().filter(|a| **a == NodeAnswer::Ok).count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_masked() {
        assert_eq!(mask("0123456789abcdef"), "01234567…");
    }
}
