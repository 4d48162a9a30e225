//! A fast connection's socket: opened with blocking I/O (connect, AUTH,
//! SELECT, a name and the scripts loaded, in one round trip), then handed
//! over non-blocking, to be polled.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use redis::{ConnectionAddr, ConnectionInfo};

use super::resp;
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
        if let Some(v) = resp::decode(buf)? {
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
