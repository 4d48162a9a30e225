//! The JS thread's driver of an acquisition (of any kind of lock: see
//! `ops::acquisition::Take`): it runs the acquisition machine
//! (`ops::acquisition`) from its first attempt to its outcome as the
//! thread's loop reads the nodes' replies, sends what the
//! machine asks for (an attempt, its undo, a retry) on the same
//! connections, wakes it at the instant it names (a pause's end, its wait
//! ending mid-attempt) on the same loop's timer, and decides nothing. A
//! contended acquisition waits in the key's line like the tokio driver's
//! (`acquire::join`): the subscriber connection's release notices reach it
//! through the [`Waker`] the binding gives, which queues its turn on the
//! JS thread.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Packed, Reply};
use crate::core::transport::uvloop::owed::Script;
use tokio::runtime::Handle;

use crate::core::engine::acquire::{behind_earlier_callers, plan_of, register, Request};
use crate::core::engine::inner::{Inner, Running};
use crate::core::engine::line::{join, timer_fired, woke, Queued};
use crate::core::engine::lock::Lock;
use crate::core::engine::waiters::Waker;
use crate::core::error::LockError;
use crate::core::ops::acquisition::{Acquisition, Cancel, Event, Outcome, Purpose};
use crate::core::ops::LateAnswers;

/// The acquisition of `request` on the JS thread, its first attempt ready
/// to send once its turn came (earlier callers of its client for the key
/// first); the request back when this driver does not take it
/// (`waitReplicas`, a closed client). `runtime` runs what it starts off the
/// thread (the key's subscription). Once it waits (for its turn, in the
/// key's line, or in a pause) it wants a [`Waker`]
/// ([`FastAcquire::wants_waker`]). The request moves, not boxed.
#[allow(clippy::result_large_err)]
pub(crate) fn fast_acquire(
    inner: &Arc<Inner>,
    request: Request,
    runtime: Handle,
    connecting: bool,
) -> std::result::Result<FastAcquire, Request> {
    let inner = inner.clone();
    if inner.closing.begun() {
        return Err(request);
    }
    let mut request = request;
    let plan = plan_of(&inner, &mut request);
    if plan.wait_replicas.is_some() {
        // WAIT blocks the connection it runs on: tokio's own, not this thread's.
        request.names_back(plan);
        return Err(request);
    }
    let token = plan.take.token();
    let now = Instant::now();
    let acq = Box::new(Acquisition::in_turn(plan, token, rand::random(), now));
    let mut op = FastAcquire {
        inner,
        acq,
        request: Some(request),
        queued: None,
        runtime,
        waker: None,
        faulted: false,
        running: None,
        late: None,
        packed: None,
        connect: connecting.then_some(None),
    };
    // Earlier callers of this key may not have had their turn yet.
    op.take_turn(now);
    // Behind callers already in the key's line: it joins it now. Nothing
    // has been sent, so there is no outcome yet.
    let begun = op.step();
    debug_assert!(matches!(begun, Step::Pending));
    Ok(op)
}

/// What an acquisition came to after a reply.
pub enum Step {
    /// Nothing for the caller yet.
    Pending,
    Won(Lock),
    Failed(LockError),
}

/// What the machine has to send at one turn: mostly one command.
pub type Sends = smallvec::SmallVec<[Send; 1]>;

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
    /// Boxed: an acquisition and its driver each stay under 1 KiB (glibc
    /// consolidates its free lists before every larger allocation).
    acq: Box<Acquisition>,
    /// `None` once settled.
    request: Option<Request>,
    /// Its place in the key's line while it waits there.
    queued: Option<Queued>,
    runtime: Handle,
    /// Told when its turn may have come, or a release notice or a caller
    /// behind woke its place in line; given once it waits.
    waker: Option<Waker>,
    faulted: bool,
    /// A won attempt's nodes still out count as the client's background work.
    running: Option<Running>,
    /// Where those nodes' answers go: the won lock's record.
    late: Option<LateAnswers>,
    /// The last command packed for the wire, shared by every node it goes
    /// to (on several nodes).
    packed: Option<(Purpose, Packed)>,
    /// Its connections are being opened: its turn come, it begins once they
    /// are ([`FastAcquire::connected`]), or at the instant here (the node
    /// timeout), so the validity clock does not pay for a handshake.
    connect: Option<Option<Instant>>,
}

impl FastAcquire {
    /// Some node answered with a fault (its event went first).
    pub fn faulted(&self) -> bool {
        self.faulted
    }

    /// The commands the machine has for the nodes now.
    pub fn sends(&mut self) -> Sends {
        let acq = &mut self.acq;
        let mut sends = Sends::new();
        while let Some(t) = acq.poll_transmit() {
            let packed = match &self.packed {
                Some((purpose, p)) if *purpose == t.purpose => p.clone(),
                _ => {
                    let p = Packed::for_nodes(Script::of(t.call), self.inner.nodes.len());
                    if let Packed::Shared(_) = p {
                        self.packed = Some((t.purpose, p.clone()));
                    }
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
        self.hears();
        self.acq.handle_reply(node, purpose, reply, now);
        self.woken_in_pause(now);
        self.step()
    }

    /// The instant the machine must be woken at (a pause's end, the wait
    /// ending mid-attempt). A node's bound on a command needs no timer here:
    /// each command's deadline on its connection (the same node timeout, from
    /// its sending) answers it by then.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if let Some(Some(until)) = self.connect {
            return Some(until);
        }
        let at = self.acq.poll_timeout()?;
        let answered_anyway = self.acq.commands_due().is_some_and(|due| due <= at);
        (!answered_anyway).then_some(at)
    }

    /// The timer set for `at` fired at `now`: what came due happens (a pause
    /// ends in the next attempt; the wait ending mid-attempt fails it, its
    /// undo owed on every node it went to).
    pub fn timeout(&mut self, at: Option<Instant>, now: Instant) -> Step {
        if let Some(Some(until)) = self.connect {
            return match now >= until {
                true => self.connected(now),
                false => self.step(),
            };
        }
        self.hears();
        let request = self.request.as_ref();
        match request {
            Some(request) => timer_fired(
                &self.inner,
                &mut self.acq,
                request,
                self.queued.as_ref(),
                at,
                now,
            ),
            None => self.acq.handle_timeout(now),
        }
        self.woken_in_pause(now);
        self.step()
    }

    /// It was told to look (see `fast_acquire`'s `waker`): its turn came,
    /// so it begins; or its place in the key's line was woken (a release
    /// notice, a caller behind it whose timer fired), so a pause ends in the
    /// next attempt.
    pub fn notice(&mut self, now: Instant) -> Step {
        if self.acq.waits_for_turn() {
            self.take_turn(now);
        } else {
            self.woken_in_pause(now);
        }
        self.step()
    }

    /// A wake ends a pause. One that came while an attempt was out stays
    /// pending: it ends the pause that follows, or goes to the next in line
    /// when this one leaves it (a semaphore's release wakes one waiter per
    /// permit it frees; spent here, it would wake nobody).
    fn woken_in_pause(&mut self, now: Instant) {
        if self.acq.is_paused() && self.queued.as_ref().is_some_and(|q| q.place.take_woken()) {
            self.hears();
            woke(&self.inner, &mut self.acq, now);
        }
    }

    /// It waits (for its turn, in the key's line, or in a pause) and has no
    /// [`Waker`] yet: its driver gives one ([`FastAcquire::wake_with`]).
    pub fn wants_waker(&self) -> bool {
        self.waker.is_none()
            && self.request.is_some()
            && (self.acq.waits_for_turn() || self.queued.is_some() || self.acq.is_paused())
    }

    /// `waker` is told when its turn may have come, or a release notice or a
    /// caller behind woke its place in line (at once if that happened already).
    pub fn wake_with(&mut self, waker: Waker) {
        if self.acq.waits_for_turn() {
            if let Some(arrival) = self.request.as_ref().and_then(|r| r.arrival.as_ref()) {
                arrival.on_turn(waker.clone());
            }
        }
        if let Some(q) = &self.queued {
            q.place.on_wake(waker.clone());
        }
        self.waker = Some(waker);
    }

    /// Begins once every earlier caller's first attempt was answered: at
    /// once, or in the key's line behind those already waiting there.
    fn take_turn(&mut self, now: Instant) {
        let Some(request) = self.request.as_ref() else {
            return;
        };
        if request.arrival.as_ref().is_some_and(|a| !a.may_go()) {
            return;
        }
        let behind = behind_earlier_callers(&self.inner, self.acq.plan(), request);
        if let (false, Some(until)) = (behind, &mut self.connect) {
            if until.is_none() {
                *until = Some(now + self.acq.node_timeout());
            }
            return;
        }
        self.acq.handle_turn(behind, now);
    }

    /// It waits for its connections to open.
    pub fn connecting(&self) -> bool {
        self.connect.is_some()
    }

    /// Its connections are open (or failed to open) at `now`: its turn
    /// come, it begins.
    pub fn connected(&mut self, now: Instant) -> Step {
        if self.connect.take().is_some() && self.acq.waits_for_turn() {
            self.take_turn(now);
        }
        self.step()
    }

    /// The caller stopped waiting: the outcome is `ERR_LOCK_ABORTED`,
    /// and an attempt in flight is undone on every node it went to.
    pub fn cancel(&mut self) -> Step {
        self.acq.cancel(Cancel::Aborted);
        self.step()
    }

    /// Its client closes: the outcome is `ERR_LOCK_CLOSED`, and an attempt
    /// in flight is undone on every node it went to.
    pub fn close(&mut self) -> Step {
        self.acq.cancel(Cancel::Closed);
        self.step()
    }

    /// Every node delivers the key's release notices: the machine may wait for one.
    fn hears(&mut self) {
        if self.queued.as_ref().is_some_and(Queued::heard) {
            self.acq.listening();
        }
    }

    fn step(&mut self) -> Step {
        if self.request.is_some() && !self.acq.is_done() && self.inner.closing.begun() {
            self.acq.cancel(Cancel::Closed);
        }
        let mut listen = false;
        while let Some(event) = self.acq.poll_event() {
            match event {
                Event::Fault { node, answer } => {
                    self.faulted = true;
                    self.inner.report_fault(node, &answer);
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
                Event::Listen => listen = true,
                Event::Late { node, answer } => {
                    if let Some(late) = &self.late {
                        late.put(node, answer);
                    }
                }
                Event::Answered => {
                    if let Some(arrival) = self.request.as_ref().and_then(|r| r.arrival.as_ref()) {
                        arrival.answered();
                    }
                }
            }
        }
        if listen {
            self.queue_up();
        }
        if self.running.is_some() && self.acq.all_answered() {
            self.running = None;
        }
        let Some(outcome) = self.acq.outcome() else {
            return Step::Pending;
        };
        // Out of the key's line (a notice it did not act on goes to the next).
        self.queued = None;
        let Some(request) = self.request.take() else {
            return Step::Pending;
        };
        match outcome {
            Outcome::Failed(e) => Step::Failed(e),
            Outcome::Won(won) => {
                if !self.acq.all_answered() {
                    self.running = Some(self.inner.track());
                }
                let (lock, late) = register(&self.inner, won, &request, None);
                self.late = Some(late);
                match lock {
                    Ok(lock) => Step::Won(lock),
                    Err(e) => Step::Failed(e),
                }
            }
        }
    }

    /// Contended: it joins the key's line, where a release notice (heard by
    /// the client's subscriber connection) or a caller behind wakes it.
    fn queue_up(&mut self) {
        if self.queued.is_some() {
            return;
        }
        let Some(request) = self.request.as_ref() else {
            return;
        };
        let key = self.acq.plan().keys[0].clone();
        let (queued, _subscribing) = join(
            &self.inner,
            &key,
            self.acq.token(),
            request.arrival.as_ref(),
            self.runtime.clone(),
        );
        if let Some(waker) = &self.waker {
            queued.place.on_wake(waker.clone());
        }
        self.queued = Some(queued);
        self.hears();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::core::client::Client;
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

    /// A runtime never driven: what the driver starts there (the key's
    /// subscription) never runs, so no notice is heard but those a test makes.
    fn idle_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
    }

    /// How often the driver was told to give the machine its turn.
    fn counting_waker() -> (Waker, Arc<AtomicUsize>) {
        let told = Arc::new(AtomicUsize::new(0));
        let count = told.clone();
        let waker: Waker = Arc::new(move || {
            count.fetch_add(1, Ordering::SeqCst);
        });
        (waker, told)
    }

    fn start(c: &Client, rt: &tokio::runtime::Runtime, opts: &AcquireOptions) -> FastAcquire {
        begin(c, rt, opts, false)
    }

    fn begin(
        c: &Client,
        rt: &tokio::runtime::Runtime,
        opts: &AcquireOptions,
        connecting: bool,
    ) -> FastAcquire {
        let request = c.prepare_lock(vec!["k".into()], opts).expect("a request");
        match fast_acquire(&c.inner, request, rt.handle().clone(), connecting) {
            Ok(op) => op,
            Err(_) => panic!("a plain lock is driven here"),
        }
    }

    fn started(c: &Client, rt: &tokio::runtime::Runtime) -> FastAcquire {
        start(c, rt, &AcquireOptions::default())
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

    fn purposes(sends: &[Send]) -> Vec<(usize, Purpose)> {
        sends.iter().map(|s| (s.node, s.purpose)).collect()
    }

    #[test]
    fn its_connections_being_opened_it_begins_once_they_are_or_at_the_node_timeout() {
        let c = client(3);
        let rt = idle_runtime();
        let _in = rt.enter();
        let mut op = begin(&c, &rt, &AcquireOptions::default(), true);
        assert!(
            op.sends().is_empty(),
            "nothing goes out before its connections are open"
        );
        assert!(op.connecting());
        let bound = op.poll_timeout().expect("the node timeout bounds the wait");
        assert!(matches!(op.connected(Instant::now()), Step::Pending));
        assert!(!op.connecting());
        let first = op.sends();
        assert_eq!(
            purposes(&first),
            (0..3).map(|n| (n, Purpose::Attempt(1))).collect::<Vec<_>>()
        );
        // Not open by the node timeout: it begins anyway (the commands wait
        // on the connections, and their deadlines tell). (Another client: the
        // first one's callers go in call order.)
        let c = client(3);
        let mut op = begin(&c, &rt, &AcquireOptions::default(), true);
        assert!(matches!(
            op.timeout(Some(bound), bound - ms(1)),
            Step::Pending
        ));
        assert!(op.sends().is_empty(), "not yet");
        let at = op.poll_timeout().expect("its bound");
        op.timeout(Some(at), at);
        assert_eq!(op.sends().len(), 3);
        // Cancelled while they open: no attempt, the caller's error.
        let c = client(3);
        let mut op = begin(&c, &rt, &AcquireOptions::default(), true);
        match op.cancel() {
            Step::Failed(e) => assert_eq!(e.code, crate::core::error::ErrorCode::Aborted),
            _ => panic!("a cancel ends it"),
        }
        assert!(op.sends().is_empty());
    }

    #[test]
    fn a_lost_attempt_is_undone_then_retried_here_after_its_pause() {
        let c = client(3);
        let rt = idle_runtime();
        let _in = rt.enter(); // a won lock starts the watchdog there
        let mut op = started(&c, &rt);
        let first = op.sends();
        assert_eq!(first.len(), 3, "one attempt per node");
        assert!(first.iter().all(|s| s.purpose == Purpose::Attempt(1)));
        assert!(
            matches!((&first[0].packed, &first[2].packed),
                (Packed::Shared(a), Packed::Shared(b)) if Arc::ptr_eq(a, b)),
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
        assert!(
            op.queued.is_some(),
            "contended on one key: it waits in its line"
        );
        assert_eq!(
            purposes(&op.sends()),
            [(0, Purpose::Undo(1))],
            "only the node that may hold our token"
        );
        assert!(matches!(
            op.answer(0, Purpose::Undo(1), Ok(R::Int(1)), t0 + ms(4)),
            Step::Pending
        ));
        let at = op.poll_timeout().expect("paused until the retry");
        assert!(at > t0 + ms(4));
        assert!(matches!(op.timeout(Some(at), at - ms(1)), Step::Pending));
        assert!(op.sends().is_empty(), "not before the pause ends");
        assert!(matches!(op.timeout(Some(at), at), Step::Pending));
        assert_eq!(
            purposes(&op.sends()),
            [
                (0, Purpose::Attempt(2)),
                (1, Purpose::Attempt(2)),
                (2, Purpose::Attempt(2))
            ],
            "the retry goes out from here"
        );
        for node in 0..3 {
            let _ = op.answer(
                node,
                Purpose::Attempt(2),
                granted(),
                at + ms(1 + node as u64),
            );
        }
        assert!(op.queued.is_none(), "won: out of the key's line");
    }

    #[test]
    fn a_release_notice_ends_the_pause_at_once() {
        let c = client(1);
        let rt = idle_runtime();
        let _in = rt.enter(); // a won lock starts the watchdog there
        let mut op = started(&c, &rt);
        assert!(
            !op.wants_waker(),
            "its attempt is out: nothing to wake it for"
        );
        op.sends();
        let t0 = Instant::now();
        let step = op.answer(0, Purpose::Attempt(1), held(5_000), t0);
        assert!(
            matches!(step, Step::Pending),
            "held everywhere: nothing to undo"
        );
        assert!(op.sends().is_empty());
        assert!(op.wants_waker(), "in the key's line");
        let (waker, told) = counting_waker();
        op.wake_with(waker);
        assert!(!op.wants_waker());
        assert!(matches!(op.notice(t0 + ms(1)), Step::Pending));
        assert!(op.sends().is_empty(), "no notice yet: it keeps pausing");
        let key = op.acq.plan().keys[0].clone();
        c.inner.waiters.released(&key, "the-holder");
        assert_eq!(told.load(Ordering::SeqCst), 1, "the driver is told");
        assert!(matches!(op.notice(t0 + ms(2)), Step::Pending));
        assert_eq!(
            purposes(&op.sends()),
            [(0, Purpose::Attempt(2))],
            "woken: it tries at once"
        );
        assert!(
            !op.queued.as_ref().is_some_and(|q| q.place.take_woken()),
            "the notice is spent"
        );
        let Step::Won(lock) = op.answer(0, Purpose::Attempt(2), granted(), t0 + ms(3)) else {
            panic!("won");
        };
        assert_eq!(lock.attempts(), 2);
    }

    #[test]
    fn a_second_caller_waits_for_its_turn_then_joins_the_line_behind_the_first() {
        let c = client(1);
        let rt = idle_runtime();
        let _in = rt.enter(); // a won lock starts the watchdog there
        let mut first = started(&c, &rt);
        assert_eq!(first.sends().len(), 1);
        let mut second = started(&c, &rt);
        assert!(second.wants_waker(), "it waits for its turn");
        let (waker, told) = counting_waker();
        second.wake_with(waker);
        assert!(
            second.sends().is_empty(),
            "the first caller's attempt is still out"
        );
        assert_eq!(told.load(Ordering::SeqCst), 0);
        let t0 = Instant::now();
        let _ = first.answer(0, Purpose::Attempt(1), held(5_000), t0);
        assert!(first.queued.is_some(), "the first waits in the key's line");
        assert_eq!(
            told.load(Ordering::SeqCst),
            1,
            "the second is told its turn came"
        );
        assert!(matches!(second.notice(t0 + ms(1)), Step::Pending));
        assert!(
            second.sends().is_empty(),
            "behind the first in line: no attempt of its own"
        );
        assert!(second.queued.is_some(), "in the line behind the first");
        let key = first.acq.plan().keys[0].clone();
        c.inner.waiters.released(&key, "the-holder");
        assert!(matches!(first.notice(t0 + ms(2)), Step::Pending));
        assert_eq!(
            purposes(&first.sends()),
            [(0, Purpose::Attempt(2))],
            "the release wakes the first in line"
        );
        assert!(matches!(second.notice(t0 + ms(2)), Step::Pending));
        assert!(second.sends().is_empty(), "not the second");
        let Step::Won(_lock) = first.answer(0, Purpose::Attempt(2), granted(), t0 + ms(3)) else {
            panic!("the first wins");
        };
    }

    #[test]
    fn a_wake_while_its_attempt_is_out_is_not_spent_it_goes_to_the_next_in_line() {
        let c = client(1);
        let rt = idle_runtime();
        let _in = rt.enter(); // a won lock starts the watchdog there
        let t0 = Instant::now();
        let mut first = started(&c, &rt);
        first.sends();
        let _ = first.answer(0, Purpose::Attempt(1), held(5_000), t0);
        let (waker, _) = counting_waker();
        first.wake_with(waker);
        let mut second = started(&c, &rt);
        assert!(second.sends().is_empty(), "in line behind the first");
        let (waker, told) = counting_waker();
        second.wake_with(waker);
        let key = first.acq.plan().keys[0].clone();
        // A release that frees two permits wakes two waiters, one notice each.
        c.inner.waiters.released(&key, "holder#1");
        let _ = first.notice(t0 + ms(1));
        assert_eq!(purposes(&first.sends()), [(0, Purpose::Attempt(2))]);
        c.inner.waiters.released(&key, "holder#2");
        let _ = first.notice(t0 + ms(2));
        assert!(first.sends().is_empty(), "its attempt is out already");
        assert_eq!(told.load(Ordering::SeqCst), 0, "not the second's yet");
        let Step::Won(_lock) = first.answer(0, Purpose::Attempt(2), granted(), t0 + ms(3)) else {
            panic!("the first wins");
        };
        assert_eq!(
            told.load(Ordering::SeqCst),
            1,
            "leaving the line, the first hands the wake it did not use to the second"
        );
        let _ = second.notice(t0 + ms(4));
        assert_eq!(
            purposes(&second.sends()),
            [(0, Purpose::Attempt(1))],
            "the second tries at once, not at its timer"
        );
    }

    #[test]
    fn a_wait_shorter_than_the_node_timeout_ends_the_attempt_here() {
        let c = client(1);
        let rt = idle_runtime();
        let opts = AcquireOptions {
            wait_timeout: Some(ms(50)),
            ..AcquireOptions::default()
        };
        let mut op = start(&c, &rt, &opts);
        op.sends();
        let at = op.poll_timeout().expect("the wait bounds the attempt");
        assert!(
            matches!(op.timeout(Some(at), at - ms(1)), Step::Pending),
            "not yet"
        );
        let Step::Failed(e) = op.timeout(Some(at), at) else {
            panic!("the wait is over");
        };
        assert_eq!(e.code, crate::core::error::ErrorCode::Timeout);
        let undo: Vec<Purpose> = op.sends().iter().map(|s| s.purpose).collect();
        assert_eq!(undo, [Purpose::Undo(1)], "the attempt in flight is undone");
        assert!(op.poll_timeout().is_none(), "nothing more to wake for");
    }

    #[test]
    fn a_cancel_while_paused_ends_it_with_nothing_owed() {
        let c = client(1);
        let rt = idle_runtime();
        let mut op = started(&c, &rt);
        op.sends();
        let _ = op.answer(0, Purpose::Attempt(1), held(5_000), Instant::now());
        let Step::Failed(e) = op.cancel() else {
            panic!("cancelled");
        };
        assert_eq!(e.code, crate::core::error::ErrorCode::Aborted);
        assert!(op.sends().is_empty(), "nothing in flight to undo");
        assert!(op.queued.is_none(), "out of the key's line");
    }

    #[test]
    fn a_node_fault_is_flagged_for_the_event_to_go_first() {
        let c = client(1);
        let rt = idle_runtime();
        let mut op = started(&c, &rt);
        op.sends();
        let fault = Err(crate::core::error::NodeAnswer::Timeout);
        let _ = op.answer(0, Purpose::Attempt(1), fault, Instant::now());
        assert!(op.faulted());
    }
}
#[cfg(test)]
mod size_tests {
    /// glibc consolidates its free lists before each allocation of 1 KiB or
    /// more: the state an acquire allocates stays in smaller pieces.
    #[test]
    fn an_acquisition_and_its_driver_state_each_stay_under_1_kib() {
        use std::mem::size_of;
        assert!(size_of::<super::FastAcquire>() < 1000);
        assert!(size_of::<crate::core::ops::acquisition::Acquisition>() < 1000);
        assert!(size_of::<crate::core::engine::acquire::Request>() < 1000);
    }
}
