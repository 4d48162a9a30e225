//! The JS thread's driver of a plain lock's acquisition: it runs the
//! acquisition machine (`ops::acquisition`) as the thread's loop reads the
//! nodes' replies, sends what the machine asks for (an attempt, its undo)
//! on the same connections, wakes it at the instant it names (its wait
//! ending mid-attempt) on the same loop's timer, and decides nothing. Won or failed, it settles
//! here; once the machine pauses before another attempt (nothing in
//! flight), the tokio driver goes on with the same machine, where release
//! notices and the caller's timers are heard.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{packed, Packed, Reply};
use crate::core::acquire::{drives, plan_of, register, Continued, Request};
use crate::core::client::Client;
use crate::core::error::LockError;
use crate::core::keys;
use crate::core::lock::Lock;
use crate::core::ops::acquisition::{Acquisition, Cancel, Event, Outcome, Purpose};
use crate::core::shared::{Inner, Running};

/// The acquisition of `request` on the JS thread, its first attempt ready
/// to send; the request back when this driver does not take it (permits,
/// `waitReplicas`, a closed client, earlier callers of the key still ahead).
pub fn fast_acquire(
    client: &Client,
    request: Box<Request>,
) -> std::result::Result<FastAcquire, Box<Request>> {
    let inner = client.inner().clone();
    if !drives(&inner, &request) || inner.ensure_open().is_err() {
        return Err(request);
    }
    let names = keys::prefixed(&inner.cfg.key_prefix, &request.names);
    // Callers of this client already wait for the key: a first attempt sent
    // at once would overtake them. The tokio driver queues it behind them.
    if names.iter().any(|k| inner.waiters.waiting(k)) {
        return Err(request);
    }
    // Earlier callers of this key have not had their turn yet.
    if request.arrival.as_ref().is_some_and(|a| !a.may_go()) {
        return Err(request);
    }
    let plan = plan_of(&inner, &request);
    let token = crate::core::model::token(None);
    let acq = Acquisition::new(plan, token, rand::random(), Instant::now());
    Ok(FastAcquire {
        inner,
        acq: Some(acq),
        request: Some(request),
        listen: false,
        faulted: false,
        running: None,
        packed: None,
    })
}

/// What an acquisition came to after a reply.
pub enum Step {
    /// Nothing for the caller yet.
    Pending,
    Won(Lock),
    Failed(LockError),
    /// Paused before its next attempt: the tokio driver goes on with it.
    Continue(Box<Continued>),
}

/// A command for one node's connection.
pub struct Send {
    pub node: usize,
    pub purpose: Purpose,
    pub packed: Packed,
    /// The node's bound on answering it, from its sending.
    pub timeout: Duration,
}

/// An acquisition driven on the JS thread.
pub struct FastAcquire {
    inner: Arc<Inner>,
    /// `None` once the tokio driver took it.
    acq: Option<Acquisition>,
    /// `None` once settled or handed on.
    request: Option<Box<Request>>,
    /// Contended: it asks to hear the key's release notices.
    listen: bool,
    faulted: bool,
    /// A won attempt's nodes still out count as the client's background work.
    running: Option<Running>,
    /// The last command packed for the wire, shared by every node it goes to.
    packed: Option<(Purpose, Packed)>,
}

impl FastAcquire {
    /// Some node answered with a fault (its event went first).
    pub fn faulted(&self) -> bool {
        self.faulted
    }

    /// The commands the machine has for the nodes now.
    pub fn sends(&mut self) -> Vec<Send> {
        let Some(acq) = self.acq.as_mut() else {
            return Vec::new();
        };
        let mut sends = Vec::new();
        while let Some(t) = acq.poll_transmit() {
            let packed = match &self.packed {
                Some((purpose, p)) if *purpose == t.purpose => p.clone(),
                _ => {
                    let p = packed(&t.call);
                    self.packed = Some((t.purpose, p.clone()));
                    p
                }
            };
            sends.push(Send {
                node: t.node,
                purpose: t.purpose,
                packed,
                timeout: acq.node_timeout(),
            });
        }
        sends
    }

    /// Node `node`'s reply to `purpose` at `now`, and what the acquisition
    /// came to (a caller's outcome at most once).
    pub fn answer(&mut self, node: usize, purpose: Purpose, reply: Reply, now: Instant) -> Step {
        let Some(acq) = self.acq.as_mut() else {
            return Step::Pending;
        };
        acq.handle_reply(node, purpose, reply, now);
        if self.request.is_some() && !acq.is_done() && self.inner.ensure_open().is_err() {
            acq.cancel(Cancel::Closed);
        }
        self.step()
    }

    /// The instant the machine must be woken at (a node's bound, the wait),
    /// while this driver runs it.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.acq.as_ref().and_then(Acquisition::poll_timeout)
    }

    /// The time is `now`: what came due happens (the wait ending mid-attempt
    /// fails it, its undo owed on every node it went to).
    pub fn timeout(&mut self, now: Instant) -> Step {
        let Some(acq) = self.acq.as_mut() else {
            return Step::Pending;
        };
        acq.handle_timeout(now);
        self.step()
    }

    /// The caller stopped waiting: the outcome is `ERR_LOCK_ABORTED`,
    /// and an attempt in flight is undone on every node it went to.
    pub fn cancel(&mut self) -> Step {
        let Some(acq) = self.acq.as_mut() else {
            return Step::Pending;
        };
        acq.cancel(Cancel::Aborted);
        self.step()
    }

    fn step(&mut self) -> Step {
        let Some(acq) = self.acq.as_mut() else {
            return Step::Pending;
        };
        while let Some(event) = acq.poll_event() {
            match event {
                Event::Fault { node, answer } => {
                    self.faulted = true;
                    self.inner.report_fault(&self.inner.nodes[node], &answer);
                }
                Event::Contended => {
                    self.inner
                        .stats
                        .contended
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Event::Woken => {
                    self.inner
                        .stats
                        .woken
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Event::Listen => self.listen = true,
                Event::Answered => {
                    if let Some(arrival) = self.request.as_ref().and_then(|r| r.arrival.as_ref()) {
                        arrival.answered();
                    }
                }
            }
        }
        if self.running.is_some() && acq.all_answered() {
            self.running = None;
        }
        if let Some(outcome) = acq.outcome() {
            let Some(request) = self.request.take() else {
                return Step::Pending;
            };
            return match outcome {
                Outcome::Failed(e) => Step::Failed(e),
                Outcome::Won(won) => {
                    if !acq.all_answered() {
                        self.running = Some(self.inner.track());
                    }
                    let keys = acq.plan().keys.clone();
                    match register(&self.inner, keys, won, &request) {
                        Ok(lock) => Step::Won(lock),
                        Err(e) => Step::Failed(e),
                    }
                }
            };
        }
        if acq.is_paused() {
            if let (Some(acq), Some(request)) = (self.acq.take(), self.request.take()) {
                return Step::Continue(Box::new(Continued {
                    acq,
                    request: *request,
                    listen: self.listen,
                }));
            }
        }
        Step::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::config::{AcquireOptions, ClientConfig, NodeSpec};
    use crate::core::ops::Reply as R;

    fn client(nodes: u16) -> Client {
        let cfg = ClientConfig {
            nodes: (0..nodes)
                .map(|i| NodeSpec::Master(format!("redis://127.0.0.1:{}", 1 + i)))
                .collect(),
            ..ClientConfig::default()
        };
        Client::new(cfg, None).expect("a client of unused ports")
    }

    fn started(c: &Client) -> FastAcquire {
        let request = c
            .prepare_lock(vec!["k".into()], &AcquireOptions::default())
            .expect("a request");
        match fast_acquire(c, Box::new(request)) {
            Ok(op) => op,
            Err(_) => panic!("a plain lock is driven here"),
        }
    }

    fn granted() -> Reply {
        Ok(R::Array(vec![R::Int(1), R::Int(0)]))
    }

    fn held(ms: i64) -> Reply {
        Ok(R::Array(vec![R::Int(0), R::Int(ms)]))
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_lost_attempt_is_undone_here_and_continued_elsewhere_once_paused() {
        let c = client(3);
        let mut op = started(&c);
        let first = op.sends();
        assert_eq!(first.len(), 3, "one attempt per node");
        assert!(first.iter().all(|s| s.purpose == Purpose::Attempt(1)));
        assert!(
            Arc::ptr_eq(&first[0].packed, &first[2].packed),
            "packed once for every node"
        );
        let t0 = Instant::now();
        assert!(matches!(
            op.answer(0, Purpose::Attempt(1), granted(), t0 + ms(1)),
            Step::Pending
        ));
        assert!(matches!(
            op.answer(1, Purpose::Attempt(1), held(40), t0 + ms(2)),
            Step::Pending
        ));
        assert!(
            matches!(
                op.answer(2, Purpose::Attempt(1), held(70), t0 + ms(3)),
                Step::Pending
            ),
            "lost, but its undo must land before the pause"
        );
        let undo: Vec<(usize, Purpose)> = op.sends().iter().map(|s| (s.node, s.purpose)).collect();
        assert_eq!(
            undo,
            [(0, Purpose::Undo(1))],
            "only the node that may hold our token"
        );
        let Step::Continue(next) = op.answer(0, Purpose::Undo(1), Ok(R::Int(1)), t0 + ms(4)) else {
            panic!("paused: the tokio driver goes on");
        };
        assert!(
            next.listen,
            "contended on one key: it listens for the release"
        );
        assert!(next.acq.is_paused());
        assert!(
            matches!(
                op.answer(1, Purpose::Attempt(1), held(1), t0 + ms(5)),
                Step::Pending
            ),
            "handed on: nothing more here"
        );
        assert!(op.sends().is_empty());
    }

    #[test]
    fn an_attempt_held_everywhere_pauses_at_once_with_nothing_to_undo() {
        let c = client(1);
        let mut op = started(&c);
        op.sends();
        let step = op.answer(0, Purpose::Attempt(1), held(5), Instant::now());
        assert!(matches!(step, Step::Continue(_)));
        assert!(op.sends().is_empty());
    }

    #[test]
    fn a_wait_shorter_than_the_node_timeout_ends_the_attempt_here() {
        let c = client(1);
        let opts = AcquireOptions {
            wait_timeout: Some(ms(50)),
            ..AcquireOptions::default()
        };
        let request = c.prepare_lock(vec!["k".into()], &opts).expect("a request");
        let Ok(mut op) = fast_acquire(&c, Box::new(request)) else {
            panic!("a plain lock is driven here");
        };
        op.sends();
        let at = op.poll_timeout().expect("the wait bounds the attempt");
        assert!(matches!(op.timeout(at - ms(1)), Step::Pending), "not yet");
        let Step::Failed(e) = op.timeout(at) else {
            panic!("the wait is over");
        };
        assert_eq!(e.code, crate::core::error::ErrorCode::Timeout);
        let undo: Vec<Purpose> = op.sends().iter().map(|s| s.purpose).collect();
        assert_eq!(undo, [Purpose::Undo(1)], "the attempt in flight is undone");
        assert!(op.poll_timeout().is_none(), "nothing more to wake for");
    }

    #[test]
    fn a_node_fault_is_flagged_for_the_event_to_go_first() {
        let c = client(1);
        let mut op = started(&c);
        op.sends();
        let fault = Err(crate::core::error::NodeAnswer::Timeout);
        let _ = op.answer(0, Purpose::Attempt(1), fault, Instant::now());
        assert!(op.faulted());
    }
}
