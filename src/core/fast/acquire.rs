//! A first acquire attempt on the fast path: `ops::acquire` fed the replies
//! as the JS thread's loop reads them; the outcome a lock, or the attempt,
//! judged and its undo sent here, handed to the tokio acquire loop
//! (`Resume`), which goes on from that verdict.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::{packed, Late, Packed, Reply};
use crate::core::acquire::{Attempt, Judged, Request, Resume, SentUndo, Won};
use crate::core::broken;
use crate::core::client::Client;
use crate::core::error::LockError;
use crate::core::keys::{self, CHANNEL_PREFIX};
use crate::core::lock::Lock;
use crate::core::model::Answers;
use crate::core::model::LockKind;
use crate::core::ops::{self, acquire::Lease};
use crate::core::quorum::Acquired;
use crate::core::shared::Inner;
use crate::core::time::ms_of;

/// A first acquire attempt of `client` for the fast path; the request back
/// when it is not one (permits, `waitReplicas`, a closed client).
pub fn fast_acquire(
    client: &Client,
    request: Box<Request>,
) -> std::result::Result<FastAcquire, Box<Request>> {
    let inner = client.inner().clone();
    if request.permits.is_some()
        || request.spec.wait_replicas.is_some()
        || inner.ensure_open().is_err()
    {
        return Err(request);
    }
    let keys = keys::prefixed(&inner.cfg.key_prefix, &request.names);
    // Callers of this client already wait for the key: a first attempt
    // sent at once would overtake them (they are woken by the release
    // notice on the runtime). Take the runtime path, behind them.
    if keys.iter().any(|k| inner.waiters.waiting(k)) {
        return Err(request);
    }
    // Earlier callers of this key have not had their turn yet.
    if request.arrival.as_ref().is_some_and(|a| !a.may_go()) {
        return Err(request);
    }
    let script_keys = keys::script_keys(&keys, inner.cfg.fencing);
    let token = crate::core::model::token(request.permits);
    let spec = &request.spec;
    let packed = packed(&ops::acquire::call(
        &script_keys,
        keys.len(),
        &token,
        ms_of(spec.ttl),
    ));
    let timeout = inner.cfg.node_timeout_for(spec.ttl);
    let lease = Lease {
        ttl: spec.ttl,
        drift: inner.cfg.drift_for(spec.ttl),
        min_validity: spec.min_validity,
        fencing: inner.cfg.fencing,
    };
    let record = Answers::default();
    Ok(FastAcquire {
        op: ops::acquire::Acquire::new(inner.nodes.len(), lease, record.clone()),
        late: Late::new(inner.clone()),
        lease,
        inner,
        request: Some((request, keys, token)),
        packed,
        timeout,
        started: Instant::now(),
        record,
        undo: None,
    })
}

/// What a fast first attempt came to.
pub enum Outcome {
    Won(Lock),
    Failed(LockError),
    /// Not taken: the acquisition goes on on tokio from this attempt.
    Resume(Box<Resume>),
}

/// A first acquire attempt on every node, its answers so far.
pub struct FastAcquire {
    inner: Arc<Inner>,
    request: Option<(Box<Request>, Vec<String>, String)>,
    pub packed: Packed,
    /// Each node's bound, from the moment of sending.
    pub timeout: Duration,
    started: Instant,
    op: ops::acquire::Acquire,
    late: Late,
    lease: Lease,
    record: Answers,
    /// A failed attempt's token-checked release, and where it is due.
    undo: Option<Undo>,
}

/// A failed first attempt's undo, sent here alone, behind the attempt on
/// the same connections (a stalled node runs it after the attempt, never
/// before); the acquire loop hears which nodes it did not reach.
pub struct Undo {
    pub release: Packed,
    pub nodes: Vec<usize>,
    pub timeout: Duration,
    pub landing: Landing,
}

/// An undo's answers as they come in.
pub struct Landing {
    keys: usize,
    out: usize,
    missed: Vec<usize>,
    tell: Option<oneshot::Sender<Vec<usize>>>,
}

impl Landing {
    fn new(keys: usize, nodes: usize) -> (Landing, oneshot::Receiver<Vec<usize>>) {
        let (tell, heard) = oneshot::channel();
        let landing = Landing {
            keys,
            out: nodes,
            missed: Vec::new(),
            tell: Some(tell),
        };
        (landing, heard)
    }

    /// Node `i`'s answer to the undo (`None`: it could not be sent there); a
    /// fault counts as not reached.
    pub fn answered(&mut self, i: usize, reply: Option<Reply>) {
        let reached = reply.is_some_and(|r| !ops::release::answer(r, self.keys).is_fault());
        if !reached {
            self.missed.push(i);
        }
        self.out = self.out.saturating_sub(1);
        if self.out == 0 {
            if let Some(tell) = self.tell.take() {
                // The loop may have ended meanwhile: nobody is left to hear it.
                let _ = tell.send(std::mem::take(&mut self.missed));
            }
        }
    }
}

impl FastAcquire {
    /// Some node answered with a fault (its event goes first).
    pub fn faulted(&self) -> bool {
        self.op.faulted()
    }

    /// A failed attempt's undo, for the driver to send (the acquire loop
    /// undoes only the nodes it did not reach).
    pub fn take_undo(&mut self) -> Option<Undo> {
        self.undo.take()
    }

    /// Marks `now`, the moment before the first command goes out (the validity clock).
    pub fn sending(&mut self, now: Instant) {
        self.started = now;
    }

    /// Node `i`'s reply at `now`; the outcome once it is decided (at most once).
    pub fn answer(&mut self, i: usize, reply: Reply, now: Instant) -> Option<Outcome> {
        let started = broken::validity_start(self.started);
        let progress = self.op.on_reply(i, reply, started, now);
        let answers = self.late.follow(progress)?;
        let (request, keys, token) = self.request.take()?;
        let validity = self.lease.validity(started, now);
        let verdict = ops::acquire::verdict(&answers, validity, request.spec.min_validity);
        let attempt = Attempt {
            fence: self.op.fence(),
            sent: vec![true; answers.len()],
            answers,
            record: self.record.clone(),
            started: self.started,
            replicas: None,
            stray: Vec::new(),
            member: None,
        };
        let inner = &self.inner;
        if verdict != Acquired::Won || inner.ensure_open().is_err() {
            let nodes = attempt.to_undo();
            let mut sent = None;
            if !nodes.is_empty() {
                let release = packed(&ops::release::call(&keys, &token, CHANNEL_PREFIX));
                let (landing, missed) = Landing::new(keys.len(), nodes.len());
                sent = Some(SentUndo {
                    nodes: nodes.clone(),
                    missed,
                });
                self.undo = Some(Undo {
                    release,
                    nodes,
                    timeout: self.timeout,
                    landing,
                });
            }
            let judged = Judged {
                verdict,
                at: now,
                undo: sent,
            };
            return Some(Outcome::Resume(Box::new(Resume {
                request: *request,
                token,
                attempt,
                judged,
            })));
        }
        inner.report_faults(&attempt.answers);
        let lock = inner.register(Won {
            keys,
            token,
            kind: LockKind::of(request.permits),
            attempts: 1,
            started,
            spec: &request.spec,
            attempt: &attempt,
        });
        Some(match inner.unless_closed(lock) {
            Ok(lock) => Outcome::Won(lock),
            Err(closed) => Outcome::Failed(closed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::config::{AcquireOptions, ClientConfig, NodeSpec};
    use crate::core::error::NodeAnswer;
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

    fn first_attempt(c: &Client) -> FastAcquire {
        let request = c
            .prepare_lock(vec!["k".into()], &AcquireOptions::default())
            .expect("a request");
        match fast_acquire(c, Box::new(request)) {
            Ok(op) => op,
            Err(_) => panic!("a plain lock takes the fast path"),
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
    fn a_lost_first_attempt_is_judged_here_and_its_undo_sent_from_here_once() {
        let c = client(3);
        let mut op = first_attempt(&c);
        let t0 = Instant::now();
        op.sending(t0);
        assert!(op.answer(0, granted(), t0 + ms(1)).is_none());
        assert!(op.answer(1, held(40), t0 + ms(2)).is_none());
        let Some(Outcome::Resume(resume)) = op.answer(2, held(70), t0 + ms(3)) else {
            panic!("two of three held by another: not taken");
        };
        let judged = resume.judged;
        assert_eq!(
            judged.verdict,
            Acquired::Contended {
                longest_pttl: Some(70)
            }
        );
        assert_eq!(judged.at, t0 + ms(3), "judged when decided");
        let mut undo = op.take_undo().expect("the granting node is undone");
        assert_eq!(undo.nodes, [0], "only the node that may hold our token");
        assert!(op.take_undo().is_none(), "one undo");
        let mut sent = judged.undo.expect("the loop hears of the undo");
        assert_eq!(sent.nodes, [0]);
        assert!(sent.missed.try_recv().is_err(), "not landed yet");
        undo.landing.answered(0, Some(Ok(R::Int(1))));
        assert_eq!(
            sent.missed.try_recv().ok(),
            Some(Vec::new()),
            "nothing left"
        );
    }

    #[test]
    fn a_first_attempt_held_everywhere_has_nothing_to_undo() {
        let c = client(1);
        let mut op = first_attempt(&c);
        let t0 = Instant::now();
        op.sending(t0);
        let Some(Outcome::Resume(resume)) = op.answer(0, held(5), t0 + ms(1)) else {
            panic!("held by another: not taken");
        };
        assert!(resume.judged.undo.is_none());
        assert!(op.take_undo().is_none());
    }

    #[test]
    fn an_undo_lands_once_every_node_answered_and_names_those_it_missed() {
        let (mut landing, mut missed) = Landing::new(1, 3);
        landing.answered(2, Some(Ok(R::Int(0))));
        landing.answered(0, Some(Err(NodeAnswer::Timeout)));
        assert!(missed.try_recv().is_err(), "one node still out");
        landing.answered(1, None);
        assert_eq!(missed.try_recv().ok(), Some(vec![0, 1]));
    }

    #[test]
    fn an_error_reply_to_an_undo_is_a_node_it_did_not_reach() {
        let (mut landing, mut missed) = Landing::new(1, 1);
        landing.answered(0, Some(Ok(R::Error("LOADING busy".into()))));
        assert_eq!(missed.try_recv().ok(), Some(vec![0]));
    }

    #[test]
    fn an_undo_nobody_waits_for_any_more_lands_quietly() {
        let (mut landing, missed) = Landing::new(1, 1);
        drop(missed);
        landing.answered(0, Some(Ok(R::Int(1))));
        assert!(landing.tell.is_none());
    }
}
