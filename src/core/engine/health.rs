//! Each node's health as the client sees it, and which of its faults reach
//! the `'error'` event.
//!
//! A node is *down* from its first connection failure (a timeout, a refused
//! or broken connection, a master that is not there) until it answers a
//! probe: a PING the client sends it [`PROBE_FIRST`] after it went down, then
//! at growing intervals up to [`PROBE_EVERY_MAX`]. Answering again ends the
//! outage with a `Recovered` (the `'reconnected'` event). An error reply
//! (a script error, ACL) is a fault of an answering node: reported, but the
//! node stays up.
//!
//! Faults are coalesced per node: one identical (same text) to the last one
//! reported for that node within [`REPEAT_EVERY`] is counted, not reported;
//! the next report of it carries how many were held back. The first fault of
//! an outage is always reported.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::core::base;
use crate::core::error::NodeAnswer;

/// An identical fault of one node is reported again at most this often.
pub const REPEAT_EVERY: Duration = Duration::from_secs(10);
/// The first probe of a node that went down, this long after.
pub const PROBE_FIRST: Duration = Duration::from_millis(100);
/// Probes double their interval up to this.
pub const PROBE_EVERY_MAX: Duration = Duration::from_secs(1);

/// The health of every node of one client, by index.
pub struct Health {
    nodes: Box<[Mutex<NodeHealth>]>,
}

struct NodeHealth {
    outage: Option<Outage>,
    /// When the node last went down or came back (the client's creation at first).
    since: SystemTime,
    /// The fault last reported, and when.
    last: Option<(String, Instant)>,
    /// Faults identical to `last` not reported since.
    held_back: u64,
}

struct Outage {
    from: Instant,
    faults: u64,
    error: String,
}

/// What becomes of one fault.
#[derive(Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Report it, with the number of identical faults held back before it;
    /// `None`: held back.
    pub report: Option<u64>,
    /// It began an outage: probe the node until it answers.
    pub went_down: bool,
}

/// An outage that ended: the node answered again.
#[derive(Debug, PartialEq, Eq)]
pub struct Recovered {
    pub down_ms: u64,
    /// Faults of the node during the outage, reported or not.
    pub faults: u64,
}

/// One node's health as `health()` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeStatus {
    pub up: bool,
    /// When it went down or came back, in ms since the Unix epoch.
    pub since_ms: f64,
    /// While down, its last fault.
    pub error: Option<String>,
    /// While down, its faults since it went down.
    pub faults: u64,
}

impl Health {
    pub fn new(nodes: usize) -> Health {
        let now = SystemTime::now();
        Health {
            nodes: (0..nodes)
                .map(|_| {
                    Mutex::new(NodeHealth {
                        outage: None,
                        since: now,
                        last: None,
                        held_back: 0,
                    })
                })
                .collect(),
        }
    }

    /// Records a fault of node `node` (a timeout, an unreachable node or an
    /// error reply) and says whether to report it.
    pub fn fault(&self, node: usize, answer: &NodeAnswer, now: Instant) -> Verdict {
        let text = answer.to_string();
        let mut h = base::lock(&self.nodes[node]);
        let mut went_down = false;
        if answer.is_transient() {
            match &mut h.outage {
                Some(outage) => {
                    outage.faults += 1;
                    outage.error.clone_from(&text);
                }
                None => {
                    h.outage = Some(Outage {
                        from: now,
                        faults: 1,
                        error: text.clone(),
                    });
                    h.since = SystemTime::now();
                    went_down = true;
                }
            }
        }
        let repeat = !went_down
            && matches!(&h.last, Some((last, at)) if *last == text && now.saturating_duration_since(*at) < REPEAT_EVERY);
        let report = if repeat {
            h.held_back += 1;
            None
        } else {
            let same = matches!(&h.last, Some((last, _)) if *last == text);
            let held_back = std::mem::take(&mut h.held_back);
            h.last = Some((text, now));
            Some(if same { held_back } else { 0 })
        };
        Verdict { report, went_down }
    }

    /// Node `node` answered: ends its outage, if it had one.
    pub fn answered(&self, node: usize, now: Instant) -> Option<Recovered> {
        let mut h = base::lock(&self.nodes[node]);
        let outage = h.outage.take()?;
        h.since = SystemTime::now();
        h.last = None;
        h.held_back = 0;
        Some(Recovered {
            down_ms: now.saturating_duration_since(outage.from).as_millis() as u64,
            faults: outage.faults,
        })
    }

    pub fn status(&self, node: usize) -> NodeStatus {
        let h = base::lock(&self.nodes[node]);
        let since_ms = h
            .since
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_millis() as f64);
        NodeStatus {
            up: h.outage.is_none(),
            since_ms,
            error: h.outage.as_ref().map(|o| o.error.clone()),
            faults: h.outage.as_ref().map_or(0, |o| o.faults),
        }
    }
}

/// The interval before the probe after one of `pause`.
pub fn next_probe(pause: Duration) -> Duration {
    (pause * 2).min(PROBE_EVERY_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::Fault;

    fn refused() -> NodeAnswer {
        NodeAnswer::Unreachable(Fault::from("Connection refused (os error 111)"))
    }

    #[test]
    fn an_outage_is_reported_once_then_its_identical_faults_are_counted() {
        let h = Health::new(2);
        let t0 = Instant::now();
        assert_eq!(
            h.fault(0, &refused(), t0),
            Verdict {
                report: Some(0),
                went_down: true
            }
        );
        for i in 1..=5 {
            let v = h.fault(0, &refused(), t0 + Duration::from_millis(100 * i));
            assert_eq!(v.report, None, "held back");
            assert!(!v.went_down);
        }
        // A different fault is reported at once; its count starts afresh.
        let v = h.fault(0, &NodeAnswer::Timeout, t0 + Duration::from_millis(700));
        assert_eq!(v.report, Some(0));
        assert_eq!(
            h.fault(0, &NodeAnswer::Timeout, t0 + Duration::from_secs(2))
                .report,
            None
        );
        // The same fault past REPEAT_EVERY: reported with the ones held back.
        let v = h.fault(0, &NodeAnswer::Timeout, t0 + Duration::from_secs(11));
        assert_eq!(v.report, Some(1));
        let status = h.status(0);
        assert!(!status.up);
        assert_eq!(status.faults, 9);
        assert_eq!(
            status.error.as_deref(),
            Some(&*NodeAnswer::Timeout.to_string())
        );
        assert!(h.status(1).up, "the other node is untouched");
    }

    #[test]
    fn an_answer_ends_the_outage_and_the_next_one_is_reported_at_once() {
        let h = Health::new(1);
        let t0 = Instant::now();
        h.fault(0, &refused(), t0);
        h.fault(0, &refused(), t0 + Duration::from_millis(10));
        assert!(!h.status(0).up);
        let back = h.answered(0, t0 + Duration::from_millis(1500));
        assert_eq!(
            back,
            Some(Recovered {
                down_ms: 1500,
                faults: 2
            })
        );
        assert!(h.status(0).up);
        assert_eq!(
            h.answered(0, t0 + Duration::from_secs(2)),
            None,
            "told once"
        );
        let again = h.fault(0, &refused(), t0 + Duration::from_secs(2));
        assert_eq!(
            again,
            Verdict {
                report: Some(0),
                went_down: true
            }
        );
    }

    #[test]
    fn an_error_reply_is_reported_but_the_node_stays_up() {
        let h = Health::new(1);
        let t0 = Instant::now();
        let err = NodeAnswer::ErrorReply(Fault::from("WRONGTYPE Operation against a key"));
        assert_eq!(
            h.fault(0, &err, t0),
            Verdict {
                report: Some(0),
                went_down: false
            }
        );
        assert_eq!(h.fault(0, &err, t0 + Duration::from_secs(1)).report, None);
        assert!(h.status(0).up);
    }

    #[test]
    fn probes_back_off_to_their_cap() {
        let mut pause = PROBE_FIRST;
        for _ in 0..10 {
            pause = next_probe(pause);
        }
        assert_eq!(pause, PROBE_EVERY_MAX);
    }
}
