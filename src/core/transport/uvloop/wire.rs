//! One fast connection at work, free of any event loop: a non-blocking
//! socket, the bytes still to write, and the replies owed in order (a FIFO of
//! callbacks). Whoever polls the socket calls [`Wire::on_readable`] and
//! [`Wire::on_writable`]; [`Wire::expire`] enforces the deadlines. What a
//! reply makes go again (NOSCRIPT's EVAL, a taken key's PTTL) is sent in
//! turn, as [`resend`](super::resend) says; how a wire is made and given up
//! is in [`socket`](super::socket).
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::time::Instant;

use bytes::BytesMut;

use super::owed::{deadline, decode, Again, Done, OnReply, Packed, Pending};
use super::resend::Reloads;
use super::socket::Socket;
use crate::core::base::later;
use crate::core::base::Peak;
use crate::core::error::NodeAnswer;
use crate::core::ops::script_free::Server;
use crate::core::ops::Reply;

/// Commands are corked: what one turn of the JS thread sends goes out in one
/// write, made by the owner of the socket before its loop waits
/// ([`Wire::write_out`]); once this much is packed (about ten commands) it is
/// written at once, so the server works on it while the rest is packed: 64
/// workers' pairs went from 0.85× to 1.3–1.45× raw ioredis with it (16 KB:
/// the client and the server took turns).
pub const EARLY_WRITE: usize = 1400;

/// Replies given up on that a connection may still owe before it is closed.
const MAX_ABANDONED: usize = 10_000;

/// A fast connection: one socket, its replies owed in order.
pub struct Wire {
    pub(super) sock: Socket,
    pub(super) out: Vec<u8>,
    pub(super) inb: BytesMut,
    pub(super) pending: VecDeque<Pending>,
    pub(super) abandoned: usize,
    pub(super) broken: bool,
    /// The socket took only part of `out`: the rest goes when it is writable.
    pub(super) blocked: bool,
    /// Commands sent so far (the next one's `seq`).
    pub(super) sent: u64,
    /// Bytes written to the socket so far.
    pub(super) written: u64,
    /// When the socket last took bytes, or when bytes began to wait for it:
    /// a command not yet written waits at most its bound from then.
    pub(super) progress: Instant,
    /// When a reply was last read: replies come in order, so while they
    /// keep coming a written command waits its bound from the last one
    /// (a JS thread that was busy reads what came meanwhile before anything
    /// is given up on).
    pub(super) last_read: Instant,
    /// Per script source: the `seq` of the last EVAL this connection sent
    /// after a NOSCRIPT. A call sent before it and answered NOSCRIPT goes
    /// again as EVALSHA (it now runs after that EVAL): one script body per
    /// flush, however many calls were in flight.
    pub(super) reloaded: Reloads,
    /// The most replies owed at once since the connection was last idle:
    /// once a burst drains, its queues shrink and the memory goes back.
    pub(super) peak: Peak,
    /// The commands its server has that calls may take in place of their
    /// scripts (learnt when it opened; forgotten if one is refused).
    pub(super) server: Server,
}

impl Wire {
    pub(super) fn next_seq(&mut self) -> u64 {
        self.sent += 1;
        self.sent
    }

    /// Cut, timed out or out of step: never used again.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Replies owed (waited for or not).
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// No reply is owed.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// Some command's caller still waits for its reply (the others were
    /// given up on at their deadline).
    pub fn is_waited(&self) -> bool {
        self.pending.iter().any(|p| p.on_reply.is_some())
    }

    /// Bytes wait for the socket to become writable (it took only part of them).
    pub fn wants_write(&self) -> bool {
        self.blocked && !self.out.is_empty()
    }

    /// Commands are packed but not written yet: [`Wire::write_out`] writes them.
    pub fn has_unsent(&self) -> bool {
        !self.out.is_empty() && !self.blocked && !self.broken
    }

    /// The earliest deadline of a reply someone waits for.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending
            .iter()
            .filter(|p| p.on_reply.is_some())
            .map(|p| deadline(p, self.written, self.progress, self.last_read))
            .min()
    }

    /// Sends `cmd` (packed); `on_reply` runs with its reply, or with the
    /// node's fault.
    pub fn send(&mut self, cmd: &[u8], deadline: Instant, on_reply: OnReply, done: &mut Done) {
        self.send_command(cmd, None, deadline, on_reply, done)
    }

    /// Sends a script call; on NOSCRIPT it goes again, answered in turn.
    pub fn send_script(
        &mut self,
        script: Packed,
        deadline: Instant,
        on_reply: OnReply,
        done: &mut Done,
    ) {
        let free = script.free.as_ref().filter(|f| self.server.has(f.needs));
        let replies = match free {
            Some(free) => {
                self.out.extend_from_slice(&free.bytes);
                free.replies
            }
            None => {
                self.out.extend_from_slice(&script.evalsha);
                1
            }
        };
        let free = free.is_some();
        self.queue(Some(script), (replies, free), deadline, on_reply, done);
    }

    fn send_command(
        &mut self,
        cmd: &[u8],
        retry: Option<Packed>,
        deadline: Instant,
        on_reply: OnReply,
        done: &mut Done,
    ) {
        self.out.extend_from_slice(cmd);
        self.queue(retry, (1, false), deadline, on_reply, done);
    }

    /// Owes the reply to the command just put in `out`: how many replies
    /// answer it, and whether it went without its script.
    fn queue(
        &mut self,
        retry: Option<Packed>,
        (replies, free): (u8, bool),
        deadline: Instant,
        on_reply: OnReply,
        done: &mut Done,
    ) {
        if self.broken {
            self.out.clear();
            done.push((on_reply, Err(cut("the connection is closed"))));
            return;
        }
        let seq = self.next_seq();
        let now = Instant::now();
        if self.pending.back().is_none_or(|p| p.end <= self.written) {
            // Nothing was waiting for the socket: the wait for it starts now.
            self.progress = now;
        }
        self.pending.push_back(Pending {
            deadline,
            end: self.written + self.out.len() as u64,
            on_reply: Some(on_reply),
            retry,
            seq,
            bound: deadline.saturating_duration_since(now),
            first: None,
            replies,
            free,
        });
        self.peak.track(self.pending.len());
        if self.out.len() >= EARLY_WRITE {
            self.write_out(done);
        }
    }

    /// Writes what the socket takes now of the commands packed so far.
    pub fn write_out(&mut self, done: &mut Done) {
        if self.broken {
            return;
        }
        let mut written = 0;
        while written < self.out.len() {
            match self.sock.write(&self.out[written..]) {
                Ok(0) => {
                    self.fail(cut("the connection closed"), done);
                    return;
                }
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    self.fail(cut(&e.to_string()), done);
                    return;
                }
            }
        }
        self.out.drain(..written);
        self.blocked = !self.out.is_empty();
        if written > 0 {
            self.took(written as u64);
        }
    }

    /// The socket took `n` more bytes: each command now written in full has
    /// its bound from now.
    fn took(&mut self, n: u64) {
        let before = self.written;
        self.written += n;
        let now = Instant::now();
        self.progress = now;
        for p in self.pending.iter_mut().rev() {
            if p.end <= before {
                break;
            }
            if p.end <= self.written {
                p.deadline = later(now, p.bound);
            }
        }
    }

    pub fn on_writable(&mut self, done: &mut Done) {
        self.write_out(done);
    }

    /// Reads every reply the socket holds and hands each to its command.
    pub fn on_readable(&mut self, done: &mut Done) {
        if self.broken {
            return;
        }
        let closed = self.sock.read_all(&mut self.inb).err();
        let mut resend = false;
        let mut read_any = false;
        loop {
            match decode(&mut self.inb) {
                Ok(Some(value)) => {
                    read_any = true;
                    if let Some(p) = self.pending.front_mut() {
                        if p.replies > 1 && p.first.is_none() {
                            p.first = Some(value);
                            continue;
                        }
                    }
                    let Some(mut p) = self.pending.pop_front() else {
                        self.fail(cut("a reply nobody asked for"), done);
                        return;
                    };
                    let value = match p.first.take() {
                        Some(first) => Reply::Array(vec![first, value]),
                        None => value,
                    };
                    let Some(on_reply) = p.on_reply.take() else {
                        self.abandoned = self.abandoned.saturating_sub(1);
                        continue;
                    };
                    // Sent again (NOSCRIPT, a refused script-free form), or
                    // followed by what reads the rest (a taken key's PTTL).
                    let next = self.sent + 1;
                    let again = p.again(value, next, &mut self.reloaded, &mut self.server);
                    match again {
                        Ok((cmd, Again { retry, first })) => {
                            // Sent again (nothing ran) or followed by its PTTL:
                            // answered in turn.
                            self.out.extend_from_slice(&cmd);
                            // A command of its own: its reply has the bound again.
                            let seq = self.next_seq();
                            self.pending.push_back(Pending {
                                deadline: Instant::now() + p.bound,
                                end: self.written + self.out.len() as u64,
                                on_reply: Some(on_reply),
                                retry,
                                seq,
                                bound: p.bound,
                                replies: if first.is_some() { 2 } else { 1 },
                                first,
                                free: false,
                            });
                            resend = true;
                        }
                        Err(value) => done.push((on_reply, Ok(value))),
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    self.fail(cut(&format!("unreadable reply: {e}")), done);
                    return;
                }
            }
        }
        if read_any {
            self.last_read = Instant::now();
            if self.peak.track(self.pending.len()) {
                // A burst drained: what its queues grew to goes back.
                self.pending.shrink_to_fit();
                self.out.shrink_to_fit();
                self.inb = BytesMut::with_capacity(4096);
            }
        }
        if let Some(why) = closed {
            self.fail(cut(&why), done);
        } else if resend {
            self.write_out(done);
        }
    }

    /// Answers every command past its deadline with a timeout. The connection
    /// stays, in step (their replies are read and dropped), so that what is
    /// sent after a stalled command still runs after it, as on one connection
    /// of the other path: an attempt's undo lands behind the attempt.
    pub fn expire(&mut self, now: Instant, done: &mut Done) {
        // A thread that was busy gives the socket its chance first: only a
        // socket that takes nothing holds its unwritten commands back.
        if !self.out.is_empty() {
            self.write_out(done);
        }
        let (written, progress, last_read) = (self.written, self.progress, self.last_read);
        let due = |p: &Pending| deadline(p, written, progress, last_read) <= now;
        for p in self.pending.iter_mut().filter(|p| due(p)) {
            if let Some(on_reply) = p.on_reply.take() {
                self.abandoned += 1;
                done.push((on_reply, Err(NodeAnswer::Timeout)));
            }
        }
        if self.abandoned > MAX_ABANDONED {
            self.fail(cut("too many replies overdue"), done);
        }
    }
}

pub(super) fn cut(why: &str) -> NodeAnswer {
    NodeAnswer::Unreachable(why.to_string().into())
}

/// The socket at work: non-blocking reads and writes.
impl Socket {
    pub(super) fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Socket::Unix(s) => s.read(buf),
        }
    }

    /// Reads what the socket holds onto `inb`, until it would block or a
    /// read comes back short (it took all there was: what arrives later
    /// wakes the level-triggered poll again, so asking once more would only
    /// cost a call that finds nothing). Why the connection ended, if it did.
    pub(super) fn read_all(&mut self, inb: &mut BytesMut) -> Result<(), String> {
        loop {
            inb.reserve(4096);
            let spare = inb.spare_capacity_mut();
            // SAFETY: reading into uninitialised bytes is fine for a socket read,
            // and only the `n` bytes it reports are marked as filled.
            let buf = unsafe {
                std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast::<u8>(), spare.len())
            };
            match self.read(buf) {
                Ok(0) => return Err("the connection was closed by the server".to_string()),
                Ok(n) => {
                    let short = n < buf.len();
                    // SAFETY: the read filled these `n` bytes.
                    unsafe { inb.set_len(inb.len() + n) };
                    if short {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    pub(super) fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            #[cfg(unix)]
            Socket::Unix(s) => s.write(buf),
        }
    }
}

#[cfg(all(test, unix))]
#[path = "wire_tests.rs"]
mod tests;
