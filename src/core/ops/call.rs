//! One call of a script as both transports write it: its keys and
//! arguments packed once, as RESP bulk strings in one buffer, then sent as
//! EVALSHA (or EVAL, see [`scripts`](super::scripts)), or, for a lock of one
//! key's first attempt, as a plain `SET … NX PX`. What a server with
//! commands beyond Redis 6.2's takes in their place is in
//! [`script_free`](super::script_free).

use redis::Script;

use super::scripts::{source_of, ACQUIRE};

/// Arguments packed as they go on the wire: each a RESP bulk string, one
/// buffer for all of them (no allocation per argument).
#[derive(Debug, Clone, Default)]
struct Packed {
    resp: Vec<u8>,
    count: usize,
}

/// Puts `bytes` into `v` at `at`, moving what follows (in place, without
/// `splice`'s iterator).
fn insert_at(v: &mut Vec<u8>, at: usize, bytes: &[u8]) {
    let len = v.len();
    v.resize(len + bytes.len(), 0);
    v.copy_within(at..len, at + bytes.len());
    v[at..at + bytes.len()].copy_from_slice(bytes);
}

impl Packed {
    fn push(&mut self, arg: &[u8]) {
        if self.resp.capacity() == 0 {
            // Room for a lock's key, token and notice channel, and the
            // EVALSHA header put before them (`Call::into_packed`).
            self.resp.reserve(192 + arg.len());
        }
        bulk(&mut self.resp, arg);
        self.count += 1;
    }
}

/// Each bulk string's bytes in `resp`, in order.
fn parts(mut rest: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let rest_now = rest.strip_prefix(b"$")?;
        let end = rest_now.iter().position(|&b| b == b'\r')?;
        let len: usize = std::str::from_utf8(&rest_now[..end]).ok()?.parse().ok()?;
        let body = rest_now.get(end + 2..end + 2 + len)?;
        rest = rest_now.get(end + 2 + len + 2..)?;
        Some(body)
    })
}

impl redis::RedisWrite for Packed {
    fn write_arg(&mut self, arg: &[u8]) {
        self.push(arg);
    }

    fn write_arg_fmt(&mut self, arg: impl std::fmt::Display) {
        formatted(arg, |text| self.push(text));
    }

    fn writer_for_next_arg(&mut self) -> impl std::io::Write + '_ {
        ArgWriter {
            to: self,
            bytes: Vec::new(),
        }
    }
}

/// One argument written in pieces; packed once complete (when dropped).
struct ArgWriter<'a> {
    to: &'a mut Packed,
    bytes: Vec<u8>,
}

impl std::io::Write for ArgWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for ArgWriter<'_> {
    fn drop(&mut self) {
        self.to.push(&self.bytes);
    }
}

/// `arg` as text, handed to `to` (on the stack when short: numbers).
fn formatted(arg: impl std::fmt::Display, to: impl FnOnce(&[u8])) {
    use std::io::Write;
    let mut digits = [0u8; 48];
    let mut at = std::io::Cursor::new(&mut digits[..]);
    if write!(at, "{arg}").is_ok() {
        let n = at.position() as usize;
        to(&digits[..n]);
    } else {
        to(arg.to_string().as_bytes());
    }
}

/// Appends `arg` as a RESP bulk string.
pub(super) fn bulk(out: &mut Vec<u8>, arg: &[u8]) {
    header(out, b'$', arg.len());
    out.extend_from_slice(arg);
    out.extend_from_slice(b"\r\n");
}

/// Appends `<kind><n>\r\n`.
pub(super) fn header(out: &mut Vec<u8>, kind: u8, n: usize) {
    out.push(kind);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// One call of a script: its keys and arguments, sent as EVALSHA or EVAL.
/// Both transports write it: tokio as a [`redis::Cmd`] ([`Call::cmd`]), the
/// fast path as the bytes of [`Call::evalsha`], packed from the wire form
/// the keys and arguments are kept in.
///
/// Or, [`Call::plain_take`], what a lock of one key's first attempt sends
/// instead of its script: `SET key token NX PX ttl`, answered OK, or nil
/// and then, once the transport sent `PTTL key` after it, the array of
/// both replies (the holder's lease left).
///
/// A lock of one key's release ([`Call::unlock`]) and extension
/// ([`Call::prolong`]) are script calls that a server with the commands
/// for them may take without a script instead ([`Call::script_free`],
/// in `script_free`).
#[derive(Debug, Clone)]
pub struct Call<'s> {
    pub script: &'s Script,
    /// The keys, then the arguments: one buffer for both.
    packed: Packed,
    /// Where the keys' bytes end in `packed`, and how many keys there are.
    keys_end: usize,
    key_count: usize,
    pub(super) form: Form,
}

/// What a call is besides its script (see [`Call`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    Script,
    Take,
    Unlock,
    Prolong,
}

impl<'s> Call<'s> {
    pub fn new(script: &'s Script) -> Call<'s> {
        Call {
            script,
            packed: Packed::default(),
            keys_end: 0,
            key_count: 0,
            form: Form::Script,
        }
    }

    /// The keys' bytes, each a RESP bulk string.
    fn keys_resp(&self) -> &[u8] {
        &self.packed.resp[..self.keys_end]
    }

    /// The arguments' bytes, each a RESP bulk string.
    fn args_resp(&self) -> &[u8] {
        &self.packed.resp[self.keys_end..]
    }

    pub(super) fn key_parts(&self) -> impl Iterator<Item = &[u8]> {
        parts(self.keys_resp())
    }

    pub(super) fn arg_parts(&self) -> impl Iterator<Item = &[u8]> {
        parts(self.args_resp())
    }

    fn arg_count(&self) -> usize {
        self.packed.count - self.key_count
    }

    /// `SET key token NX PX ttl_ms`, and only when it answers nil `PTTL key`
    /// ([`Call::on_nil`]): the take of a fresh token on one key without its
    /// script (no fence, no key that may already hold the token). Stands
    /// for [`ACQUIRE`]'s call.
    pub fn plain_take(key: &str, token: &str, ttl_ms: u64) -> Call<'static> {
        let mut call = Call::new(&ACQUIRE);
        call.key(key)
            .arg(token)
            .arg(itoa::Buffer::new().format(ttl_ms));
        call.form = Form::Take;
        call
    }

    /// Plain commands ([`Call::plain_take`]) rather than a script.
    pub fn is_plain(&self) -> bool {
        self.form == Form::Take
    }

    /// The first key's bytes.
    pub fn keys_first(&self) -> &[u8] {
        self.key_parts().next().unwrap_or_default()
    }

    /// [`Call::plain_take`]'s SET, for tokio.
    pub fn plain_set(&self) -> redis::Cmd {
        let key = self.key_parts().next().unwrap_or_default();
        let mut args = self.arg_parts();
        let (token, ttl) = (
            args.next().unwrap_or_default(),
            args.next().unwrap_or_default(),
        );
        let mut set = redis::cmd("SET");
        set.arg(key).arg(token).arg("NX").arg("PX").arg(ttl);
        set
    }

    /// What goes after a plain take's SET answered nil (the key is
    /// another's): `PTTL key`, whose reply is read with the SET's as one
    /// array, `[nil, pttl]`. Nothing for any other call.
    pub fn on_nil(&self) -> Option<Vec<u8>> {
        if !self.is_plain() {
            return None;
        }
        let mut out = Vec::with_capacity(16 + self.keys_end);
        header(&mut out, b'*', 2);
        bulk(&mut out, b"PTTL");
        out.extend_from_slice(self.keys_resp());
        Some(out)
    }

    /// The bytes of the call: EVALSHA, or a plain take's SET.
    pub fn packed(&self) -> Vec<u8> {
        if !self.is_plain() {
            return self.evalsha();
        }
        let mut out = Vec::with_capacity(48 + self.keys_end + self.args_resp().len());
        header(&mut out, b'*', 6);
        bulk(&mut out, b"SET");
        out.extend_from_slice(self.keys_resp());
        out.extend_from_slice(&self.args_resp()[..self.args_split()]);
        bulk(&mut out, b"NX");
        bulk(&mut out, b"PX");
        out.extend_from_slice(&self.args_resp()[self.args_split()..]);
        out
    }

    /// [`Call::packed`]'s bytes made in the call's own buffer (the header
    /// put before its keys and arguments there): no copy of them.
    pub fn into_packed(mut self) -> Vec<u8> {
        use std::io::Write;
        let mut buf = [0u8; 128];
        let mut head = std::io::Cursor::new(&mut buf[..]);
        if self.is_plain() {
            let split = self.keys_end + self.args_split();
            let mut nx_px = [0u8; 16];
            let mut at = 0;
            for word in [&b"NX"[..], b"PX"] {
                nx_px[at..at + 8].copy_from_slice(b"$2\r\n__\r\n");
                nx_px[at + 4..at + 6].copy_from_slice(word);
                at += 8;
            }
            insert_at(&mut self.packed.resp, split, &nx_px);
            let _ = head.write_all(b"*6\r\n$3\r\nSET\r\n");
        } else {
            let (keys, hash) = (self.key_count, self.script.get_hash());
            let mut digits = itoa::Buffer::new();
            let count = digits.format(keys);
            let mut parts = itoa::Buffer::new();
            let mut hash_len = itoa::Buffer::new();
            let mut count_len = itoa::Buffer::new();
            for part in [
                b"*",
                parts.format(3 + keys + self.arg_count()).as_bytes(),
                b"\r\n$7\r\nEVALSHA\r\n$",
                hash_len.format(hash.len()).as_bytes(),
                b"\r\n",
                hash.as_bytes(),
                b"\r\n$",
                count_len.format(count.len()).as_bytes(),
                b"\r\n",
                count.as_bytes(),
                b"\r\n",
            ] {
                let _ = head.write_all(part);
            }
        }
        let n = head.position() as usize;
        insert_at(&mut self.packed.resp, 0, &buf[..n]);
        self.packed.resp
    }

    /// Where the second argument's bytes begin.
    fn args_split(&self) -> usize {
        let first = self.arg_parts().next().map_or(0, <[u8]>::len);
        let head = 1 + itoa::Buffer::new().format(first).len() + 2;
        (head + first + 2).min(self.args_resp().len())
    }

    /// Adds the key(s) `key` (a string, or a slice of them).
    pub fn key<T: redis::ToRedisArgs>(&mut self, key: T) -> &mut Self {
        let before = self.packed.count;
        if self.keys_end == self.packed.resp.len() {
            key.write_redis_args(&mut self.packed);
            self.keys_end = self.packed.resp.len();
        } else {
            // Arguments came first: the keys still go before them.
            let mut more = Packed::default();
            key.write_redis_args(&mut more);
            let at = self.keys_end;
            insert_at(&mut self.packed.resp, at, &more.resp);
            self.packed.count += more.count;
            self.keys_end += more.resp.len();
        }
        self.key_count += self.packed.count - before;
        self
    }

    /// Adds the argument(s) `arg`.
    pub fn arg<T: redis::ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        arg.write_redis_args(&mut self.packed);
        self
    }

    /// The arguments as text (tests).
    #[cfg(test)]
    pub fn args_text(&self) -> Vec<String> {
        let text = |a: &[u8]| String::from_utf8_lossy(a).into_owned();
        self.arg_parts().map(text).collect()
    }

    /// The script's source, when it is one of `scripts::ALL` (none for plain
    /// commands: there is no script to load).
    pub fn source(&self) -> Option<&'static str> {
        if self.is_plain() {
            return None;
        }
        source_of(self.script).map(|(source, _)| source)
    }

    /// The call as EVALSHA, or with `eval` as EVAL with the script's source
    /// (EVALSHA still for a script without a known source).
    pub fn cmd(&self, eval: bool) -> redis::Cmd {
        match (eval, self.source()) {
            (true, Some(source)) => self.eval_with(source),
            _ => {
                let mut c = redis::cmd("EVALSHA");
                c.arg(self.script.get_hash());
                self.args_to(c)
            }
        }
    }

    /// The call as EVAL of `source`.
    pub fn eval_with(&self, source: &str) -> redis::Cmd {
        let mut c = redis::cmd("EVAL");
        c.arg(source);
        self.args_to(c)
    }

    /// Appends the key count, keys and arguments to `cmd`.
    pub fn args_to(&self, mut cmd: redis::Cmd) -> redis::Cmd {
        cmd.arg(self.key_count);
        for k in self.key_parts() {
            cmd.arg(k);
        }
        for a in self.arg_parts() {
            cmd.arg(a);
        }
        cmd
    }

    /// The bytes of the call as EVALSHA.
    pub fn evalsha(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(80 + self.keys_end + self.args_resp().len());
        header(&mut out, b'*', 3 + self.key_count + self.arg_count());
        bulk(&mut out, b"EVALSHA");
        bulk(&mut out, self.script.get_hash().as_bytes());
        bulk(
            &mut out,
            itoa::Buffer::new().format(self.key_count).as_bytes(),
        );
        out.extend_from_slice(self.keys_resp());
        out.extend_from_slice(self.args_resp());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ops::scripts::{ACQUIRE, RELEASE};

    #[test]
    fn a_plain_take_is_the_set_redis_rs_packs_then_a_pttl_on_nil() {
        for (key, token) in [
            ("k", "t"),
            ("{a}:b\r\n", "0b7e8f5e-7d2c-4c51-9a43-3d4b2f1e6a90"),
        ] {
            let call = Call::plain_take(key, token, 30_000);
            assert!(call.is_plain());
            assert_eq!(call.source(), None, "no script to load");
            assert_eq!(call.packed(), call.plain_set().get_packed_command());
            let by_hand = redis::cmd("SET")
                .arg(key)
                .arg(token)
                .arg("NX")
                .arg("PX")
                .arg(30_000u64)
                .get_packed_command();
            assert_eq!(call.packed(), by_hand);
            let pttl = redis::cmd("PTTL").arg(key).get_packed_command();
            assert_eq!(call.on_nil(), Some(pttl));
        }
        let script = Call::plain_take("k", "t", 1);
        assert!(!Call::new(&ACQUIRE).is_plain());
        assert_eq!(Call::new(&ACQUIRE).on_nil(), None);
        assert_eq!(Call::new(&ACQUIRE).packed(), Call::new(&ACQUIRE).evalsha());
        assert!(script.packed() != script.evalsha());
    }

    #[test]
    fn a_call_packed_by_hand_is_the_command_redis_rs_packs() {
        let keys = ["a".to_string(), "{b}:c".to_string()];
        let mut call = Call::new(&ACQUIRE);
        call.key(&keys[..])
            .key("")
            .arg("tok\r\nen")
            .arg(30_000u64)
            .arg(-7i64)
            .arg(2.5f64)
            .arg(&b"\0bytes"[..])
            .arg("");
        let by_redis = call.cmd(false).get_packed_command();
        assert_eq!(call.evalsha(), by_redis);
        assert_eq!(
            call.args_text(),
            ["tok\r\nen", "30000", "-7", "2.5", "\0bytes", ""]
        );
        // Keys given after arguments still go before them.
        let mut late = Call::new(&RELEASE);
        late.arg("a").key("k").arg(7u64).key(&keys[..]);
        let mut by_hand = redis::cmd("EVALSHA");
        by_hand
            .arg(RELEASE.get_hash())
            .arg(3)
            .arg("k")
            .arg(&keys[..])
            .arg("a")
            .arg(7u64);
        assert_eq!(late.evalsha(), by_hand.get_packed_command());
        assert_eq!(
            late.cmd(false).get_packed_command(),
            by_hand.get_packed_command()
        );
        assert_eq!(late.args_text(), ["a", "7"]);
        assert_eq!(late.clone().into_packed(), late.evalsha());
        let take = Call::plain_take("{a}:b", "tok", 30_000);
        assert_eq!(take.clone().into_packed(), take.packed());
        let bare = Call::new(&RELEASE);
        assert_eq!(bare.evalsha(), bare.cmd(false).get_packed_command());
        assert_eq!(bare.clone().into_packed(), bare.evalsha());
        assert!(bare.args_text().is_empty());
    }
}
