//! The JS-loop driver's napi-free half: it runs the acquisition machine and
//! the release and extend operations of `core::ops` over a plain
//! connection's transport (`transport/uvloop`), fed one node reply at a
//! time. Whoever owns the sockets (the JS thread's event loop)
//! sends [`Packed`] commands and hands each reply to `answer`; the outcome is
//! the same as the tokio path's: the same operations, the same quorum
//! verdicts, the same lock state, errors and node reports.

mod acquire;
mod extend;
mod release;

use std::sync::Arc;

use redis::ConnectionInfo;

use crate::core::broken::{self, Broken};
use crate::core::engine::inner::{Inner, Running};
use crate::core::error::NodeAnswer;
use crate::core::ops::Progress;
use crate::core::ops::{LateAnswers, SharedAnswers};
use crate::core::quorum::NodeAnswers;
pub use crate::core::transport::uvloop::owed::Packed;

pub(crate) use acquire::fast_acquire;
pub use acquire::{FastAcquire, Send, Sends, Step};
pub use extend::{fast_extend, FastExtend};
pub use release::{fast_release, FastRelease};

/// What a command came back with: a reply, or the node's fault.
pub type Reply = crate::core::ops::Answer;

/// Opens `client`'s runtime connections in the background (the watchdog
/// renews on them), so that the first renewal of a lock this thread's loop
/// took finds them open.
pub(crate) fn warm_runtime(inner: &Arc<Inner>, runtime: &tokio::runtime::Handle) {
    let inner = inner.clone();
    runtime.spawn(async move {
        let opening = inner.nodes.iter().map(|n| n.connection());
        let _ = futures_util::future::join_all(opening).await;
    });
}

/// `LOCKDOG_FAST_PATH=0` (or `false`, `off`) keeps every operation on tokio.
pub fn switched_off() -> bool {
    matches!(
        std::env::var("LOCKDOG_FAST_PATH").as_deref(),
        Ok("0" | "false" | "off")
    )
}

/// What the driver does with an operation's progress: the answers once
/// decided; late answers have their faults reported, and the operation
/// counts as background work (`settled()`, `close()`) until the last one.
struct Late {
    inner: Arc<Inner>,
    running: Option<Running>,
    /// The lock's record of answers, and once decided where late ones go.
    record: SharedAnswers,
    late: Option<LateAnswers>,
}

impl Late {
    fn new(inner: Arc<Inner>, record: SharedAnswers) -> Late {
        Late {
            inner,
            running: None,
            record,
            late: None,
        }
    }

    fn follow(&mut self, progress: Progress) -> Option<NodeAnswers> {
        match progress {
            Progress::Waiting => None,
            Progress::Decided(answers) => {
                if answers.iter().any(|a| matches!(a, NodeAnswer::Pending)) {
                    self.running = Some(self.inner.track());
                }
                self.late = Some(LateAnswers::begin(self.record.clone(), &answers));
                Some(answers)
            }
            Progress::Late {
                node,
                answer,
                fault,
                all_in,
            } => {
                if let Some(late) = &self.late {
                    late.put(node, answer);
                }
                if let Some(fault) = fault {
                    self.inner.report_fault(node, &fault);
                }
                if all_in {
                    self.running = None;
                }
                None
            }
        }
    }
}

/// A fast operation decided on its replies alone (a release, an extension).
pub trait Decided {
    type Out;
    /// Each node's bound, from the moment of sending.
    fn timeout(&self) -> std::time::Duration;
    /// Node `i`'s reply; the outcome once it is decided (at most once).
    fn answer(&mut self, i: usize, reply: Reply) -> Option<crate::core::error::Result<Self::Out>>;
    /// Some node answered with a fault (its event goes first).
    fn faulted(&self) -> bool;
}

/// Where the fast path may connect for `client`: every node a plain master
/// (no TLS, no cluster, RESP2), and no deliberately broken mode.
pub(crate) fn fast_targets(inner: &Inner) -> Option<Vec<ConnectionInfo>> {
    if inner.cfg.has_cluster() || broken::mode() != Broken::None {
        return None;
    }
    inner.nodes.iter().map(|n| n.plain_info()).collect()
}
