//! Counting semaphores: at most `limit` permits of one key held at a time,
//! each holder with its own token and lease. Taking permits is an
//! acquisition like a lock's with the semaphore's script (`ops::acquisition`,
//! `Take::Permits`; its permits are `model/lease.rs`); holders
//! are renewed by the watchdog's batches and released by the lock scripts.
//! On several nodes (Redlock) the permits are `limit` numbered slots, each a
//! mutex a majority must grant (`sem_slots.lua`): a count per node would let
//! holders on different majorities exceed the limit.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::join_all;

use crate::core::engine::inner::Inner;
use crate::core::error::{NodeAnswer, Result};
use crate::core::quorum;

/// What `count_permits` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    /// Permits held, as at least a quorum of nodes counts them.
    pub permits: u32,
    /// Holders, likewise.
    pub holders: u32,
}

/// The value at least a quorum of nodes reports (or more): the
/// `needed`-th largest of the answers.
fn quorum_value(mut values: Vec<u32>, needed: usize) -> u32 {
    values.sort_unstable_by(|a, b| b.cmp(a));
    values.get(needed.saturating_sub(1)).copied().unwrap_or(0)
}

/// Holders recorded by at least `needed` of the nodes' member lists (a
/// semaphore on several nodes), and the permits they hold.
fn quorum_holders(lists: &[Vec<String>], needed: usize) -> Count {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for list in lists {
        let mut mine: Vec<&str> = list.iter().map(String::as_str).collect();
        mine.sort_unstable();
        mine.dedup();
        for m in mine {
            *seen.entry(m).or_default() += 1;
        }
    }
    let mut count = Count {
        permits: 0,
        holders: 0,
    };
    for (member, n) in seen {
        if n >= needed {
            let permits = member
                .split_once(':')
                .and_then(|(p, _)| p.parse::<u32>().ok())
                .unwrap_or(1);
            count.permits = count.permits.saturating_add(permits);
            count.holders += 1;
        }
    }
    count
}

/// Counts the permits of the semaphore stored under `key` on every node.
pub(crate) async fn count_permits(inner: &Arc<Inner>, key: &str, label: &str) -> Result<Count> {
    inner.ensure_open()?;
    if inner.nodes.len() > 1 {
        return count_slot_holders(inner, key, label).await;
    }
    let timeout = inner.cfg.command_timeout;
    let replies = join_all(inner.nodes.iter().map(|n| n.count_permits(key, timeout))).await;
    let mut answers = Vec::with_capacity(replies.len());
    let mut permits = Vec::new();
    let mut holders = Vec::new();
    for reply in replies {
        match reply {
            Ok((p, h)) => {
                permits.push(p);
                holders.push(h);
                answers.push(NodeAnswer::Ok);
            }
            Err(answer) => answers.push(answer),
        }
    }
    inner.report_faults(&answers);
    if !quorum::reached(&answers) {
        return Err(inner
            .no_quorum(&answers, || "too few nodes answered the count".to_string())
            .with_key(label));
    }
    let needed = quorum::needed(answers.len());
    Ok(Count {
        permits: quorum_value(permits, needed),
        holders: quorum_value(holders, needed),
    })
}

/// [`count_permits`] on several nodes: a holder counts where a
/// quorum of nodes records it (as a holder's renewals need).
async fn count_slot_holders(inner: &Arc<Inner>, key: &str, label: &str) -> Result<Count> {
    let timeout = inner.cfg.command_timeout;
    let replies = join_all(inner.nodes.iter().map(|n| n.permit_holders(key, timeout))).await;
    let mut answers = Vec::with_capacity(replies.len());
    let mut lists = Vec::new();
    for reply in replies {
        match reply {
            Ok(list) => {
                lists.push(list);
                answers.push(NodeAnswer::Ok);
            }
            Err(answer) => answers.push(answer),
        }
    }
    inner.report_faults(&answers);
    if !quorum::reached(&answers) {
        return Err(inner
            .no_quorum(&answers, || "too few nodes answered the count".to_string())
            .with_key(label));
    }
    Ok(quorum_holders(&lists, quorum::needed(answers.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_is_what_a_quorum_reports() {
        assert_eq!(quorum_value(vec![2], 1), 2);
        assert_eq!(quorum_value(vec![1, 3, 2], 2), 2);
        assert_eq!(quorum_value(vec![0, 0, 3], 2), 0);
    }

    #[test]
    fn on_several_nodes_a_holder_counts_where_a_quorum_records_it() {
        let list = |ms: &[&str]| ms.iter().map(|m| m.to_string()).collect::<Vec<_>>();
        let lists = [
            list(&["2:0-1:a", "1:2:b"]),
            list(&["2:0-1:a", "1:3:c"]),
            list(&["2:0-1:a", "1:2:b"]),
            list(&[]),
            list(&["1:4:d"]),
        ];
        assert_eq!(
            quorum_holders(&lists, 3),
            Count {
                permits: 2,
                holders: 1
            }
        );
        assert_eq!(
            quorum_holders(&lists, 2),
            Count {
                permits: 3,
                holders: 2
            }
        );
    }
}
