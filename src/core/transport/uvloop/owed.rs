//! What a JS-thread connection sends and owes: a command as it goes out
//! ([`Script`]: a script call packed once as EVALSHA, its EVAL built only on
//! NOSCRIPT; or a plain take's SET, followed by a PTTL when answered nil),
//! the replies owed in order (`Pending`, each handed to its [`OnReply`])
//! and by when (`deadline`), and what a reply makes go again
//! (`Pending::again`).

use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::core::base::later;
use crate::core::ops::call::Call;
use crate::core::ops::script_free::{ScriptFree, Server};
use crate::core::ops::{Answer, Reply};

/// What the servers this process's connections reached have of
/// [`Server`]'s commands (a bit each): a call is packed without its script
/// as well only once some connection could take that form.
static SEEN: AtomicU8 = AtomicU8::new(0);

fn bits(server: Server) -> u8 {
    u8::from(server.del_if_eq) | (u8::from(server.set_if_eq) << 1)
}

/// A connection reached a server with `server`'s commands.
pub fn seen(server: Server) {
    SEEN.fetch_or(bits(server), Ordering::Relaxed);
}

/// A command as it goes out: owned by the one connection it goes to, or,
/// packed once, shared by the nodes of an operation on several (Redlock).
/// The connection keeps it until its reply is in: the EVAL sent on NOSCRIPT
/// is built from it only then.
pub enum Packed {
    One(Script),
    Shared(Arc<Script>),
}

impl Packed {
    /// `script` for an operation on `nodes` nodes.
    pub fn for_nodes(script: Script, nodes: usize) -> Packed {
        if nodes > 1 {
            Packed::Shared(Arc::new(script))
        } else {
            Packed::One(script)
        }
    }
}

impl std::ops::Deref for Packed {
    type Target = Script;

    fn deref(&self) -> &Script {
        match self {
            Packed::One(script) => script,
            Packed::Shared(script) => script,
        }
    }
}

impl Clone for Packed {
    /// Shared: the same script; owned: a copy (only a refused script-free
    /// form is sent again as its script, with the script kept once more).
    fn clone(&self) -> Packed {
        match self {
            Packed::One(script) => Packed::One(script.clone()),
            Packed::Shared(script) => Packed::Shared(script.clone()),
        }
    }
}

/// A script call (EVALSHA, packed once) and the script's source, for the
/// EVAL sent if a node answers NOSCRIPT; or a plain take's SET (no
/// source), followed by a PTTL when answered nil.
#[derive(Clone)]
pub struct Script {
    pub(super) evalsha: Vec<u8>,
    pub(super) source: &'static str,
    /// A plain take's SET: answered nil, `PTTL key` goes after it, its
    /// reply handed on with the nil as one array ([`Script::on_nil`]).
    pub(super) take: bool,
    /// The same call without its script, for a connection whose server has
    /// the commands (see [`Call::script_free`]).
    pub(super) free: Option<ScriptFree>,
}

/// What every EVALSHA packed by redis-rs starts with after its `*N\r\n`.
const EVALSHA_HEAD: usize = "$7\r\nEVALSHA\r\n$40\r\n".len() + 40 + 2;

impl Script {
    pub fn new(evalsha: Vec<u8>, source: &'static str) -> Script {
        Script {
            evalsha,
            source,
            take: false,
            free: None,
        }
    }

    /// `call` packed as EVALSHA (or its plain commands), once for every
    /// node it goes to (every script of `scripts` has its source; one
    /// without would have no EVAL to recover from NOSCRIPT with).
    pub fn packed(call: &Call<'_>) -> Script {
        Script::of(call.clone())
    }

    /// [`Script::packed`], the call's own buffer becoming its bytes.
    pub fn of(call: Call<'_>) -> Script {
        let source = call.source().unwrap_or("");
        let take = call.is_plain();
        let free = match SEEN.load(Ordering::Relaxed) {
            0 => None,
            seen => call.script_free().filter(|f| bits(f.needs) & seen != 0),
        };
        Script {
            evalsha: call.into_packed(),
            source,
            take,
            free,
        }
    }
    pub fn evalsha(&self) -> &[u8] {
        &self.evalsha
    }

    /// A plain take's `PTTL key` ([`Call::on_nil`]), built from its SET's
    /// key (made only when the SET found the key taken).
    pub fn on_nil(&self) -> Option<Vec<u8>> {
        const SET: &[u8] = b"*6\r\n$3\r\nSET\r\n";
        let rest = self.evalsha.strip_prefix(SET).filter(|_| self.take)?;
        let line = rest.windows(2).position(|w| w == b"\r\n")?;
        let len: usize = std::str::from_utf8(rest.get(1..line)?).ok()?.parse().ok()?;
        let key = rest.get(..line + 2 + len + 2)?;
        let mut out = Vec::with_capacity(16 + key.len());
        out.extend_from_slice(b"*2\r\n$4\r\nPTTL\r\n");
        out.extend_from_slice(key);
        Some(out)
    }

    /// The same call as EVAL with the source (built only when needed); none
    /// without a source.
    pub(crate) fn eval(&self) -> Option<Vec<u8>> {
        if self.source.is_empty() {
            return None;
        }
        let count_end = self.evalsha.windows(2).position(|w| w == b"\r\n")? + 2;
        let rest = self.evalsha.get(count_end + EVALSHA_HEAD..)?;
        if !self.evalsha[count_end..].starts_with(b"$7\r\nEVALSHA\r\n") {
            return None;
        }
        let mut eval = Vec::with_capacity(self.source.len() + self.evalsha.len());
        eval.extend_from_slice(&self.evalsha[..count_end]);
        eval.extend_from_slice(b"$4\r\nEVAL\r\n");
        eval.extend_from_slice(format!("${}\r\n", self.source.len()).as_bytes());
        eval.extend_from_slice(self.source.as_bytes());
        eval.extend_from_slice(b"\r\n");
        eval.extend_from_slice(rest);
        Some(eval)
    }
}

/// The scripts a connection sent again as EVAL after a NOSCRIPT, each with
/// the first call sent after that EVAL (one script body per flush: the
/// calls sent before it still go as EVALSHA once it is loaded).
#[derive(Default)]
pub struct Reloads(Vec<(&'static str, u64)>);

impl Reloads {
    /// What to send again for `script`, whose call `seq` was answered
    /// NOSCRIPT; `next` the sequence number it goes out with.
    pub fn resend(&mut self, script: &Script, seq: u64, next: u64) -> Option<Vec<u8>> {
        let source = script.source;
        let at = self.0.iter().position(|(s, _)| std::ptr::eq(*s, source));
        if let Some(i) = at {
            if self.0[i].1 > seq {
                return Some(script.evalsha.clone());
            }
        }
        let eval = script.eval()?;
        match at {
            Some(i) => self.0[i].1 = next,
            None => self.0.push((source, next)),
        }
        Some(eval)
    }
}

/// Runs once with the reply of the command it was sent with (or the node's
/// fault): a closure of its own, or a receiver that its commands share, told
/// which of them it is (no allocation per command).
pub enum OnReply {
    Once(Box<dyn FnOnce(Answer)>),
    To(Rc<dyn Replies>, u64),
}

/// What takes the replies of several commands ([`OnReply::To`]); `tag` is
/// what it named the command by.
pub trait Replies {
    fn reply(self: Rc<Self>, tag: u64, answer: Answer);
}

impl OnReply {
    pub fn new(f: impl FnOnce(Answer) + 'static) -> OnReply {
        OnReply::Once(Box::new(f))
    }

    /// Hands `answer` on.
    pub fn call(self, answer: Answer) {
        match self {
            OnReply::Once(f) => f(answer),
            OnReply::To(to, tag) => to.reply(tag, answer),
        }
    }
}
/// Replies to hand out once the connection is no longer borrowed.
pub type Done = Vec<(OnReply, Answer)>;

/// A command sent, its reply not yet read.
pub(super) struct Pending {
    /// Once it is written: by when its reply must come (its `bound` from
    /// the write). Before that, it is bounded by the socket taking bytes.
    pub(super) deadline: Instant,
    /// Where its bytes end in everything this connection queued: it is
    /// written once [`Wire::written`] reaches it.
    pub(super) end: u64,
    /// `None` once its deadline passed: the reply is read and dropped.
    pub(super) on_reply: Option<OnReply>,
    /// A script call, sent again if the node answers NOSCRIPT.
    pub(super) retry: Option<Packed>,
    /// Its place in the order of commands sent on this connection.
    pub(super) seq: u64,
    /// How long its reply may take (a NOSCRIPT's resend gets as long again).
    pub(super) bound: Duration,
    /// A command of two replies (a plain take's `SET` and `PTTL`): the
    /// first, until the second comes and both go on as one array.
    pub(super) first: Option<Reply>,
    pub(super) replies: u8,
    /// Sent without its script ([`Script::free`]): a refusal goes again as
    /// the script.
    pub(super) free: bool,
}

impl Pending {
    /// What `value`, this command's reply, makes go out again: a NOSCRIPT's
    /// script (as EVAL, or EVALSHA once an EVAL went since: see
    /// [`Reloads`]), a plain take's `PTTL` after its nil, a script-free form
    /// the server refused as its script. `next` is the number it goes out
    /// with. The bytes, and the command they are owed as; or the reply,
    /// to hand on.
    pub(super) fn again(
        &self,
        value: Reply,
        next: u64,
        reloaded: &mut Reloads,
        server: &mut Server,
    ) -> Result<(Vec<u8>, Again), Reply> {
        let (cmd, retry, first) = match (value, &self.retry) {
            (Reply::NoScript, Some(script)) => reloaded
                .resend(script, self.seq, next)
                .map(|c| (c, None, None))
                .ok_or(Reply::NoScript)?,
            (Reply::Nil, Some(script)) if script.take => script
                .on_nil()
                .map(|c| (c, None, Some(Reply::Nil)))
                .ok_or(Reply::Nil)?,
            (value, Some(script)) if self.free && refused(server, &value) => {
                (script.evalsha.clone(), Some(script.clone()), None)
            }
            (value, _) => return Err(value),
        };
        Ok((cmd, Again { retry, first }))
    }
}

/// How a command sent again is owed: its script, if a NOSCRIPT may send it
/// again once more, and the reply it follows (a plain take's nil, handed on
/// with the PTTL's as one array).
pub(super) struct Again {
    pub(super) retry: Option<Packed>,
    pub(super) first: Option<Reply>,
}

/// Whether a call sent without its script was refused where its script
/// would run (no right to the command, a command or option the server
/// does not know after all: then it is not used here again; a key of
/// another type, which the script reads as not this token's). Its
/// first command answers: a refused notice after it changes nothing.
fn refused(server: &mut Server, value: &Reply) -> bool {
    let first = match value {
        Reply::Array(two) => two.first(),
        one => Some(one),
    };
    let Some(Reply::Error(fault)) = first else {
        return false;
    };
    match fault.text().split_whitespace().next() {
        Some("NOPERM" | "ERR") => {
            *server = Server::default();
            true
        }
        Some("WRONGTYPE") => true,
        _ => false,
    }
}

/// By when `p`'s reply must come: its bound from its write, or from the
/// last reply read if that is later; not yet written, its bound from when the
/// socket last took bytes.
pub(super) fn deadline(
    p: &Pending,
    written: u64,
    progress: Instant,
    last_read: Instant,
) -> Instant {
    if p.end <= written {
        p.deadline.max(later(last_read, p.bound))
    } else {
        later(progress, p.bound)
    }
}
