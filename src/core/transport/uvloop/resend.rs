//! What a reply makes a JS-thread connection send again: a script call
//! answered NOSCRIPT goes again as EVAL, once per script and flush
//! ([`Reloads`]); a plain take's SET answered nil is followed by `PTTL key`
//! ([`Script::on_nil`]); a call sent without its script that the server
//! refused goes again as the script (`refused`).

use super::owed::Script;
use crate::core::ops::script_free::Server;
use crate::core::ops::Reply;

/// What every EVALSHA packed by redis-rs starts with after its `*N\r\n`.
const EVALSHA_HEAD: usize = "$7\r\nEVALSHA\r\n$40\r\n".len() + 40 + 2;

impl Script {
    /// The call as it goes out (EVALSHA, or a plain take's SET).
    pub fn evalsha(&self) -> &[u8] {
        &self.evalsha
    }

    /// A plain take's `PTTL key`
    /// ([`Call::on_nil`](crate::core::ops::call::Call::on_nil)), built from
    /// its SET's key (made only when the SET found the key taken).
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

/// Whether a call sent without its script was refused where its script
/// would run (no right to the command, a command or option the server
/// does not know after all: then it is not used here again; a key of
/// another type, which the script reads as not this token's). Its
/// first command answers: a refused notice after it changes nothing.
pub(super) fn refused(server: &mut Server, value: &Reply) -> bool {
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
