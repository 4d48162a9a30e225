//! RESP2 on the JS thread's connections: a script call packed once as
//! EVALSHA ([`Script`], with the EVAL sent on NOSCRIPT), and the bytes of a
//! reply parsed into the operations' [`Reply`], one whole reply at a time
//! (these connections speak RESP2 only).

use bytes::{Buf, BytesMut};

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use crate::core::ops::scripts::{Call, ScriptFree, Server};
use crate::core::ops::Reply;

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

/// A script call packed once as EVALSHA, shared by every node it goes to;
/// the EVAL sent on NOSCRIPT is built from it only then.
pub type Packed = Arc<Script>;

/// A script call (EVALSHA, packed once and shared by every node it goes
/// to) and the script's source, for the EVAL sent if a node answers NOSCRIPT;
/// or a plain take's SET (no source), followed by a PTTL when answered nil.
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

    /// `call` packed as EVALSHA (or its plain commands), shared by every
    /// node it goes to (every script of `scripts` has its source; one
    /// without would have no EVAL to recover from NOSCRIPT with).
    pub fn packed(call: &Call<'_>) -> Packed {
        Script::of(call.clone())
    }

    /// [`Script::packed`], the call's own buffer becoming its bytes.
    pub fn of(call: Call<'_>) -> Packed {
        let source = call.source().unwrap_or("");
        let take = call.is_plain();
        let free = match SEEN.load(Ordering::Relaxed) {
            0 => None,
            seen => call.script_free().filter(|f| bits(f.needs) & seen != 0),
        };
        Arc::new(Script {
            evalsha: call.into_packed(),
            source,
            take,
            free,
        })
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
