//! The tokio driver of an acquisition (any kind of lock): it runs the acquisition
//! machine (`ops::acquisition`) from its turn to its outcome and
//! decides nothing. It sends what the machine asks for on the nodes' shared
//! connections, arms one timer at the instant the machine names, and hands
//! it the replies, the release notices of the key's line, the caller's
//! cancel and the client's close; a won attempt becomes a held lock, and the
//! undo the machine still owes goes out in the background.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::core::engine::acquire::{behind_earlier_callers, plan_of, register, Request};
use crate::core::engine::inner::Inner;
use crate::core::engine::line::{queue_up, timer_fired, woke, Queued};
use crate::core::engine::lock::Lock;
use crate::core::error::{NodeAnswer, Result};
use crate::core::ops::acquisition::{Acquisition, Cancel, Event, Outcome, Purpose, Take, Transmit};
use crate::core::ops::Answer;
use crate::core::ops::LateAnswers;
use crate::core::transport::tokio::Connection;

/// A node's reply to one of the machine's commands (with how many replicas
/// acknowledged an attempt that waited for them).
type Arrived = (usize, Purpose, Answer, Option<u32>);

/// Takes the lock (or permits) `request` asks for.
pub(crate) async fn acquire(
    inner: &Arc<Inner>,
    mut request: Request,
    cancel: CancellationToken,
) -> Result<Lock> {
    inner.ensure_accepting()?;
    inner.stats.on_tokio.fetch_add(1, Ordering::Relaxed);
    let plan = plan_of(inner, &mut request);
    let token = plan.take.token();
    let acq = Acquisition::in_turn(plan, token, rand::random(), Instant::now());
    Driver {
        inner: inner.clone(),
        acq,
        queued: None,
        replies: mpsc::unbounded_channel(),
        unreached: vec![None; inner.nodes.len()],
        sending: (0..inner.nodes.len()).map(|_| None).collect(),
        replicas: None,
    }
    .run(request, &cancel)
    .await
}

struct Driver {
    inner: Arc<Inner>,
    acq: Acquisition,
    queued: Option<Queued>,
    replies: (
        mpsc::UnboundedSender<Arrived>,
        mpsc::UnboundedReceiver<Arrived>,
    ),
    /// Nodes the first attempt could not connect to, and why.
    unreached: Vec<Option<NodeAnswer>>,
    /// Each node's last command still going out: the next one waits for it.
    sending: Vec<Option<JoinHandle<()>>>,
    /// The last attempt that waited for replicas, and how many acknowledged.
    replicas: Option<(u32, Option<u32>)>,
}

impl Driver {
    async fn run(mut self, request: Request, cancel: &CancellationToken) -> Result<Lock> {
        let key = self.acq.plan().keys[0].clone();
        loop {
            if self.acq.waits_for_turn() {
                self.turn(&request, cancel).await;
            }
            self.send();
            while let Some(event) = self.acq.poll_event() {
                match event {
                    Event::Fault { node, answer } => self.inner.report_fault(node, &answer),
                    // (Only after the outcome: see late_answers.)
                    Event::Late { .. } => {}
                    Event::Contended => {
                        self.inner.stats.contended.fetch_add(1, Ordering::Relaxed);
                    }
                    Event::Woken => {
                        self.inner.stats.woken.fetch_add(1, Ordering::Relaxed);
                    }
                    Event::Listen => self.queue_up(&key, &request, cancel).await,
                    Event::Answered => {
                        if let Some(arrival) = &request.arrival {
                            arrival.answered();
                        }
                    }
                }
            }
            if let Some(outcome) = self.acq.outcome() {
                return self.end(outcome, request);
            }
            if self.queued.as_ref().is_some_and(Queued::heard) {
                self.acq.listening();
            }
            let at = self.acq.poll_timeout();
            let woken = async {
                match &self.queued {
                    Some(q) => q.place.woken().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                Some((node, purpose, answer, acked)) = self.replies.1.recv() => {
                    if let (Purpose::Attempt(n), Some(_)) = (purpose, self.acq.plan().wait_replicas) {
                        self.replicas = Some((n, acked));
                    }
                    self.acq.handle_reply(node, purpose, answer, Instant::now());
                }
                _ = sleep_until(at) => {
                    timer_fired(&self.inner, &mut self.acq, &request, self.queued.as_ref(), at, Instant::now());
                }
                // A wake while an attempt is out stays pending: it ends the
                // pause that may follow, or goes to the next in line.
                _ = woken, if self.acq.is_paused() => {
                    woke(&self.inner, &mut self.acq, Instant::now());
                }
                _ = cancel.cancelled() => self.acq.cancel(Cancel::Aborted),
                _ = self.inner.closing.cancelled() => self.acq.cancel(Cancel::Closed),
            }
            if self.inner.closing.begun() {
                self.acq.cancel(Cancel::Closed);
            }
        }
    }

    /// Before its first attempt: once every earlier caller of its client
    /// for the key had theirs answered, it begins (connected first, so the
    /// validity clock does not pay for a handshake; a node it could not
    /// connect to answers the first attempt with that), or joins the line
    /// behind those already waiting. Its wait, a cancel or the client's
    /// close meanwhile end it without an attempt.
    async fn turn(&mut self, request: &Request, cancel: &CancellationToken) {
        if let Some(arrival) = request.arrival.as_ref().filter(|a| !a.may_go()) {
            let at = self.acq.poll_timeout();
            tokio::select! {
                _ = arrival.turn() => {}
                _ = sleep_until(at) => {
                    self.acq.handle_timeout(Instant::now());
                    return;
                }
                _ = cancel.cancelled() => return self.acq.cancel(Cancel::Aborted),
                _ = self.inner.closing.cancelled() => return self.acq.cancel(Cancel::Closed),
            }
        }
        if self.inner.closing.begun() {
            return self.acq.cancel(Cancel::Closed);
        }
        let behind = behind_earlier_callers(&self.inner, self.acq.plan(), request);
        if !behind {
            tokio::select! {
                cons = connect_first(&self.inner, self.acq.node_timeout()) => {
                    for (slot, con) in self.unreached.iter_mut().zip(cons) {
                        *slot = con.err();
                    }
                }
                _ = cancel.cancelled() => return self.acq.cancel(Cancel::Aborted),
                _ = self.inner.closing.cancelled() => return self.acq.cancel(Cancel::Closed),
            }
        }
        // Cancelled before it began: no attempt at all.
        if cancel.is_cancelled() {
            return self.acq.cancel(Cancel::Aborted);
        }
        self.acq.handle_turn(behind, Instant::now());
    }

    /// Joins the key's line (its release notices wake the first in it); a
    /// cancel meanwhile ends the acquisition.
    async fn queue_up(&mut self, key: &str, request: &Request, cancel: &CancellationToken) {
        if self.queued.is_some() {
            return;
        }
        let pause = request.spec.retry_delay;
        let joining = queue_up(
            &self.inner,
            key,
            self.acq.token(),
            request.arrival.as_ref(),
            pause,
        );
        let q = tokio::select! {
            q = joining => q,
            _ = cancel.cancelled() => {
                self.acq.cancel(Cancel::Aborted);
                return;
            }
            _ = self.inner.closing.cancelled() => {
                self.acq.cancel(Cancel::Closed);
                return;
            }
        };
        if q.heard() {
            self.acq.listening();
        }
        self.queued = Some(q);
    }

    /// Sends every command the machine has for the nodes.
    fn send(&mut self) {
        while let Some(t) = self.acq.poll_transmit() {
            self.transmit(t, self.replies.0.clone());
        }
    }

    fn transmit(&mut self, t: Transmit, to: mpsc::UnboundedSender<Arrived>) {
        if t.purpose == Purpose::Attempt(1) {
            if let Some(answer) = self.unreached.get_mut(t.node).and_then(Option::take) {
                let _ = to.send((t.node, t.purpose, Err(answer), None));
                return;
            }
        }
        let inner = self.inner.clone();
        let timeout = self.acq.node_timeout();
        let before = self.sending.get_mut(t.node).and_then(Option::take);
        let node_i = t.node;
        let acked = self
            .acq
            .plan()
            .wait_replicas
            .filter(|_| matches!(t.purpose, Purpose::Attempt(_)));
        let sending = tokio::spawn(async move {
            // In order behind what went to this node before (an undo after
            // its attempt: sent first, it could leave the attempt's key behind).
            if let Some(before) = before {
                let _ = before.await;
            }
            let node = &inner.nodes[t.node];
            let (answer, replicas) = match acked {
                Some(acked) => node.send_acked(&t.call, Take::taken, timeout, acked).await,
                None => (
                    node.send(&t.call, timeout, inner.nodes.len() == 1).await,
                    None,
                ),
            };
            let _ = to.send((t.node, t.purpose, answer, replicas));
        });
        if let Some(slot) = self.sending.get_mut(node_i) {
            *slot = Some(sending);
        }
    }

    /// The outcome: a won attempt becomes a held lock (its late answers still
    /// reach its record); the undo still owed goes out in the background.
    fn end(mut self, outcome: Outcome, request: Request) -> Result<Lock> {
        let owed: Vec<Transmit> = std::iter::from_fn(|| self.acq.poll_transmit()).collect();
        if !owed.is_empty() {
            let inner = self.inner.clone();
            let timeout = self.acq.node_timeout();
            let owed: Vec<_> = owed
                .into_iter()
                .map(|t| {
                    let before = self.sending.get_mut(t.node).and_then(Option::take);
                    (t, before)
                })
                .collect();
            self.inner.in_background(async move {
                let sent = owed.into_iter().map(|(t, before)| {
                    let inner = inner.clone();
                    async move {
                        // After the attempt it undoes, on that node.
                        if let Some(before) = before {
                            let _ = before.await;
                        }
                        inner.nodes[t.node].send(&t.call, timeout, false).await
                    }
                });
                // Its answers change nothing: what it could not delete expires by TTL.
                futures_util::future::join_all(sent).await;
            });
        }
        let won = match outcome {
            Outcome::Failed(e) => return Err(e),
            Outcome::Won(won) => won,
        };
        let inner = self.inner.clone();
        let replicas = self
            .replicas
            .and_then(|(n, acked)| acked.filter(|_| n == won.attempts));
        let (lock, late) = register(&inner, won, &request, replicas);
        if !self.acq.all_answered() {
            self.late_answers(late);
        }
        lock
    }

    /// The nodes still out after a won attempt answer into its lock's
    /// record, in the background (`settled()` and `close()` wait for them).
    fn late_answers(self, late: LateAnswers) {
        let Driver {
            inner,
            mut acq,
            replies: (tx, mut rx),
            ..
        } = self;
        drop(tx);
        let reporter = inner.clone();
        inner.in_background(async move {
            while let Some((node, purpose, answer, _)) = rx.recv().await {
                acq.handle_reply(node, purpose, answer, Instant::now());
                for event in std::iter::from_fn(|| acq.poll_event()) {
                    match event {
                        Event::Fault { node, answer } => reporter.report_fault(node, &answer),
                        Event::Late { node, answer } => late.put(node, answer),
                        _ => {}
                    }
                }
                if acq.all_answered() {
                    return;
                }
            }
        });
    }
}

/// Every node's connection, before the first attempt (instant once
/// connected), so that the validity clock, which starts before the first
/// command is sent, does not pay for a handshake. With several nodes one
/// that cannot connect must not hold up the others: it gets the node
/// timeout (its connect goes on in the background).
async fn connect_first(inner: &Inner, timeout: Duration) -> Vec<Result<Connection, NodeAnswer>> {
    join_all(inner.nodes.iter().map(|n| async move {
        if inner.nodes.len() > 1 {
            n.connection_within(timeout).await
        } else {
            n.connection().await
        }
    }))
    .await
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
