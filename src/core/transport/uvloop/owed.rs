//! What a JS-thread connection sends, owes and reads back: a command as it
//! goes out ([`Script`]: a script call packed once as EVALSHA, its EVAL built
//! only on NOSCRIPT; or a plain take's SET, followed by a PTTL when answered
//! nil), the replies owed in order (`Pending`, each handed to its
//! [`OnReply`]) and by when (`deadline`), what a reply makes go again
//! (`Pending::again`, with [`resend`](super::resend)), and the replies
//! themselves: RESP2 (these connections speak nothing else), parsed into the
//! operations' [`Reply`] one whole reply at a time ([`decode`]).
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};

use super::resend::{refused, Reloads};
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

/// Nesting beyond this is not a reply of ours: the connection is out of step.
const MAX_DEPTH: usize = 16;

/// Takes one whole reply off the front of `buf`; `None` until it is all there.
pub fn decode(buf: &mut BytesMut) -> Result<Option<Reply>, String> {
    match parse(buf, 0)? {
        Some((reply, used)) => {
            buf.advance(used);
            Ok(Some(reply))
        }
        None => Ok(None),
    }
}

/// One reply at the front of `b` and the bytes it takes.
fn parse(b: &[u8], depth: usize) -> Result<Option<(Reply, usize)>, String> {
    if depth > MAX_DEPTH {
        return Err("a reply nested too deep".into());
    }
    let Some(end) = b.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let (kind, line) = match b.split_first() {
        Some((kind, _)) => (*kind, &b[1..end]),
        None => return Ok(None),
    };
    let text = || String::from_utf8_lossy(line).into_owned();
    let mut used = end + 2;
    let reply = match kind {
        b'+' if line == b"OK" => Reply::Status("OK".into()),
        b'+' => Reply::Status(text().into()),
        b'-' => {
            let line = text();
            let (code, detail) = line.split_once(' ').unwrap_or((&line, ""));
            Reply::error(code, detail)
        }
        b':' => Reply::Int(number(line)?),
        b'$' => {
            let Ok(len) = usize::try_from(number(line)?) else {
                return Ok(Some((Reply::Nil, used)));
            };
            let Some(body) = b.get(used..used + len + 2) else {
                return Ok(None);
            };
            if !body.ends_with(b"\r\n") {
                return Err("a bulk string without its CRLF".into());
            }
            used += len + 2;
            Reply::Bulk(body[..len].to_vec())
        }
        b'*' => {
            let Ok(count) = usize::try_from(number(line)?) else {
                return Ok(Some((Reply::Nil, used)));
            };
            let mut items = Vec::with_capacity(count.min(1024));
            for _ in 0..count {
                match parse(&b[used..], depth + 1)? {
                    Some((item, n)) => {
                        items.push(item);
                        used += n;
                    }
                    None => return Ok(None),
                }
            }
            Reply::Array(items)
        }
        other => return Err(format!("a reply starting with byte {other}")),
    };
    Ok(Some((reply, used)))
}

fn number(line: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not a number: {:?}", String::from_utf8_lossy(line)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(bytes: &[u8]) -> Reply {
        let mut buf = BytesMut::from(bytes);
        let reply = decode(&mut buf).expect("valid").expect("whole");
        assert!(buf.is_empty(), "all of it taken");
        reply
    }

    #[test]
    fn every_kind_of_reply_parses() {
        assert_eq!(one(b":-3\r\n"), Reply::Int(-3));
        assert_eq!(one(b"+OK\r\n"), Reply::Status("OK".into()));
        assert_eq!(one(b"$-1\r\n"), Reply::Nil);
        assert_eq!(one(b"*-1\r\n"), Reply::Nil);
        assert_eq!(one(b"$3\r\na\r\n\r\n"), Reply::Bulk(b"a\r\n".to_vec()));
        assert_eq!(
            one(b"*2\r\n:1\r\n*1\r\n$0\r\n\r\n"),
            Reply::Array(vec![Reply::Int(1), Reply::Array(vec![Reply::Bulk(vec![])])])
        );
    }

    #[test]
    fn error_replies_keep_code_and_detail_and_noscript_is_its_own() {
        assert_eq!(
            one(b"-WRONGTYPE bad key\r\n"),
            Reply::Error("WRONGTYPE bad key".into())
        );
        assert_eq!(one(b"-NOSCRIPT No matching script\r\n"), Reply::NoScript);
    }

    #[test]
    fn a_reply_in_pieces_waits_for_the_rest() {
        let whole = b"*2\r\n:1\r\n$5\r\nhello\r\n:9\r\n";
        let first = whole.len() - b":9\r\n".len();
        for cut in 0..first {
            let mut buf = BytesMut::from(&whole[..cut]);
            assert_eq!(decode(&mut buf), Ok(None), "cut at {cut}");
            assert_eq!(buf.len(), cut, "nothing taken");
        }
        let mut buf = BytesMut::from(&whole[..]);
        assert!(matches!(decode(&mut buf), Ok(Some(Reply::Array(_)))));
        assert_eq!(decode(&mut buf), Ok(Some(Reply::Int(9))));
        assert_eq!(decode(&mut buf), Ok(None));
    }

    #[test]
    fn garbage_is_an_error() {
        for bad in [&b"?x\r\n"[..], b":x\r\n", b"$2\r\nabcd\r\n"] {
            assert!(decode(&mut BytesMut::from(bad)).is_err(), "{bad:?}");
        }
        let deep = [b"*1\r\n".repeat(MAX_DEPTH + 2), b":1\r\n".to_vec()].concat();
        assert!(decode(&mut BytesMut::from(&deep[..])).is_err());
    }
}
