//! Counting semaphores: at most `limit` permits of one key held at a time,
//! each holder with its own token and lease. Taking permits is the lock's
//! acquire loop with the semaphore's script (`acquire/permits.rs`); holders
//! are renewed by the watchdog's batches and released by the lock scripts.
//! On several nodes (Redlock) the permits are `limit` numbered slots, each a
//! mutex a majority must grant (`sem_slots.lua`): a count per node would let
//! holders on different majorities exceed the limit.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::join_all;

use crate::core::acquire::{Kind, Permits};
use crate::core::error::{LockError, NodeAnswer, Result};
use crate::core::quorum;
use crate::core::shared::Inner;

/// The largest `limit` accepted: every acquisition counts the holders.
pub const MAX_LIMIT: u32 = 100_000;

/// Checks a semaphore's `limit` and the `permits` one acquisition asks for.
pub fn check_permits(limit: u32, permits: u32) -> Result<Permits> {
    if limit == 0 || limit > MAX_LIMIT {
        return Err(LockError::out_of_range(
            "limit",
            &format!(">= 1 and <= {MAX_LIMIT}"),
            limit,
        ));
    }
    if permits == 0 || permits > limit {
        return Err(LockError::out_of_range(
            "permits",
            &format!(">= 1 and <= limit ({limit})"),
            permits,
        ));
    }
    Ok(Permits {
        limit,
        permits,
        kind: Kind::Semaphore,
    })
}

/// How many readers a read-write lock admits at once; its writer takes them all.
pub const READERS: u32 = 10_000;

/// A fair lock: one holder, waiters served in arrival order across processes.
pub fn fair_permits() -> Permits {
    Permits {
        limit: 1,
        permits: 1,
        kind: Kind::Fair,
    }
}

/// A read-write lock's reader (`write` false) or writer.
pub fn rw_permits(write: bool) -> Permits {
    Permits {
        limit: READERS,
        permits: if write { READERS } else { 1 },
        kind: if write { Kind::Write } else { Kind::Read },
    }
}

/// What [`Inner::count_permits`] found.
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

impl Inner {
    /// Counts the permits of the semaphore stored under `key` on every node.
    pub async fn count_permits(self: &Arc<Self>, key: &str, label: &str) -> Result<Count> {
        self.ensure_open()?;
        if self.nodes.len() > 1 {
            return self.count_slot_holders(key, label).await;
        }
        let timeout = self.cfg.command_timeout;
        let replies = join_all(self.nodes.iter().map(|n| n.count_permits(key, timeout))).await;
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
        self.report_faults(&answers);
        if !quorum::reached(&answers) {
            return Err(self
                .no_quorum(&answers, || "too few nodes answered the count".to_string())
                .with_key(label));
        }
        let needed = quorum::needed(answers.len());
        Ok(Count {
            permits: quorum_value(permits, needed),
            holders: quorum_value(holders, needed),
        })
    }
}

impl Inner {
    /// [`Inner::count_permits`] on several nodes: a holder counts where a
    /// quorum of nodes records it (as a holder's renewals need).
    async fn count_slot_holders(self: &Arc<Self>, key: &str, label: &str) -> Result<Count> {
        let timeout = self.cfg.command_timeout;
        let replies = join_all(self.nodes.iter().map(|n| n.permit_holders(key, timeout))).await;
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
        self.report_faults(&answers);
        if !quorum::reached(&answers) {
            return Err(self
                .no_quorum(&answers, || "too few nodes answered the count".to_string())
                .with_key(label));
        }
        Ok(quorum_holders(&lists, quorum::needed(answers.len())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_are_checked() {
        assert!(check_permits(0, 1).is_err());
        assert!(check_permits(3, 0).is_err());
        assert!(check_permits(3, 4).is_err());
        assert!(check_permits(MAX_LIMIT + 1, 1).is_err());
        assert_eq!(
            check_permits(3, 3).ok(),
            Some(Permits {
                limit: 3,
                permits: 3,
                kind: Kind::Semaphore
            })
        );
    }

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
