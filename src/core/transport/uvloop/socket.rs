//! A fast connection's socket: opened with blocking I/O (connect, AUTH,
//! SELECT, a name and the scripts loaded, in one round trip), then handed
//! over non-blocking, to be polled; and what comes off it, RESP2 (these
//! connections speak nothing else), parsed into the operations' [`Reply`]
//! one whole reply at a time ([`decode`]). What a command goes out as is in
//! [`owed`](super::owed).

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use redis::{ConnectionAddr, ConnectionInfo};

use crate::core::ops::script_free::Server;
use crate::core::ops::scripts::source;
use crate::core::ops::Reply;

/// A connected socket.
pub enum Socket {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(std::os::unix::net::UnixStream),
}

impl Socket {
    #[cfg(unix)]
    pub fn raw_fd(&self) -> i32 {
        use std::os::unix::io::AsRawFd;
        match self {
            Socket::Tcp(s) => s.as_raw_fd(),
            Socket::Unix(s) => s.as_raw_fd(),
        }
    }

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

    fn set_timeouts(&self, t: Duration) -> io::Result<()> {
        let t = Some(t.max(Duration::from_millis(1)));
        match self {
            Socket::Tcp(s) => s.set_read_timeout(t).and_then(|_| s.set_write_timeout(t)),
            #[cfg(unix)]
            Socket::Unix(s) => s.set_read_timeout(t).and_then(|_| s.set_write_timeout(t)),
        }
    }

    /// Shuts both directions, so the server sees the connection close at once.
    pub(super) fn shutdown(&self) {
        let _ = match self {
            Socket::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            #[cfg(unix)]
            Socket::Unix(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }

    fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_nonblocking(true),
            #[cfg(unix)]
            Socket::Unix(s) => s.set_nonblocking(true),
        }
    }
}

/// The scripts the fast path sends (acquire, release, extend, a semaphore's
/// acquire), loaded when a connection opens.
const PRELOADED: [&str; 4] = [
    source::ACQUIRE,
    source::RELEASE,
    source::EXTEND,
    source::SEM_ACQUIRE,
];

/// The name a fast connection gives itself (`CLIENT SETNAME`).
pub const CLIENT_NAME: &str = "lockdog-fast";

/// Opens a plain connection to `info` with blocking I/O, all within `timeout`:
/// connect, then AUTH and SELECT as the URL asks. The socket comes back
/// non-blocking, ready to be polled, with what its server has of the
/// commands that stand for scripts (`INFO server`; nothing when refused).
pub fn connect(info: &ConnectionInfo, timeout: Duration) -> Result<(Socket, Server), String> {
    let deadline = Instant::now() + timeout;
    let left = || deadline.saturating_duration_since(Instant::now());
    let mut sock = match info.addr() {
        ConnectionAddr::Tcp(host, port) => {
            let addrs = (host.as_str(), *port)
                .to_socket_addrs()
                .map_err(|e| e.to_string())?;
            let mut last = "no address".to_string();
            let mut found = None;
            for addr in addrs {
                match TcpStream::connect_timeout(&addr, left().max(Duration::from_millis(1))) {
                    Ok(s) => {
                        found = Some(s);
                        break;
                    }
                    Err(e) => last = e.to_string(),
                }
            }
            let s = found.ok_or(last)?;
            let _ = s.set_nodelay(true);
            Socket::Tcp(s)
        }
        #[cfg(unix)]
        ConnectionAddr::Unix(path) => {
            Socket::Unix(std::os::unix::net::UnixStream::connect(path).map_err(|e| e.to_string())?)
        }
        _ => return Err("not a plain connection".into()),
    };
    let settings = info.redis_settings();
    let mut hello = Vec::new();
    if let Some(password) = settings.password() {
        let mut auth = redis::cmd("AUTH");
        if let Some(user) = settings.username() {
            auth.arg(user);
        }
        hello.push(auth.arg(password).get_packed_command());
    }
    if settings.db() != 0 {
        hello.push(redis::cmd("SELECT").arg(settings.db()).get_packed_command());
    }
    // Named so that operators (and `CLIENT LIST`) can tell it apart; a
    // refusal (ACL) changes nothing.
    let name = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg(CLIENT_NAME)
        .get_packed_command();
    // The scripts this connection sends, loaded in the same round trip: its
    // first calls on a fresh, restarted or flushed server need no NOSCRIPT
    // detour. A refusal (ACL) changes nothing: NOSCRIPT is still handled.
    let loads = PRELOADED.iter().map(|source| {
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(*source)
            .get_packed_command()
    });
    let info = redis::cmd("INFO").arg("server").get_packed_command();
    let mut buf = BytesMut::with_capacity(256);
    let must = hello.len();
    let handshake: Vec<Vec<u8>> = hello.into_iter().chain([name, info]).chain(loads).collect();
    let mut server = Server::default();
    // One write, one round trip: the replies come back in order.
    sock.set_timeouts(left()).map_err(|e| e.to_string())?;
    write_all(&mut sock, &handshake.concat()).map_err(|e| e.to_string())?;
    for i in 0..handshake.len() {
        sock.set_timeouts(left()).map_err(|e| e.to_string())?;
        match read_one(&mut sock, &mut buf)? {
            Reply::Error(e) if i < must => return Err(e.text().to_string()),
            Reply::Bulk(text) if i == must + 1 => {
                server = Server::of_info(&String::from_utf8_lossy(&text));
            }
            _ => continue,
        }
    }
    sock.set_nonblocking().map_err(|e| e.to_string())?;
    Ok((sock, server))
}

fn write_all(sock: &mut Socket, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match sock.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One reply, with blocking reads (the connect's handshake).
fn read_one(sock: &mut Socket, buf: &mut BytesMut) -> Result<Reply, String> {
    loop {
        if let Some(v) = decode(buf)? {
            return Ok(v);
        }
        let mut chunk = [0u8; 512];
        match sock.read(&mut chunk) {
            Ok(0) => return Err("connection closed during the handshake".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
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
