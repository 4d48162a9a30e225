//! A fast connection made and given up: its socket opened with blocking I/O
//! (connect, AUTH, SELECT, a name and the scripts loaded, in one round
//! trip), then handed over non-blocking, to be polled, as a [`Wire`]; and
//! the wire broken or abandoned. What it does at work is in
//! [`wire`](super::wire), what goes out and comes back in
//! [`owed`].

use std::collections::VecDeque;
use std::io;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use redis::{ConnectionAddr, ConnectionInfo};

use super::owed::{self, decode, Done, OnReply};
use super::resend::Reloads;
use super::wire::Wire;
use crate::core::base::Peak;
use crate::core::error::NodeAnswer;
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

/// A connection made from its socket, told its server's commands, and
/// given up.
impl Wire {
    pub fn new(sock: Socket) -> Wire {
        Wire {
            sock,
            out: Vec::new(),
            inb: BytesMut::with_capacity(4096),
            pending: VecDeque::new(),
            abandoned: 0,
            broken: false,
            blocked: false,
            sent: 0,
            written: 0,
            progress: Instant::now(),
            last_read: Instant::now(),
            reloaded: Reloads::default(),
            peak: Peak::default(),
            server: Server::default(),
        }
    }

    /// The connection's server has `server`'s commands.
    pub fn serves(&mut self, server: Server) {
        self.server = server;
        owed::seen(server);
    }

    pub fn socket(&self) -> &Socket {
        &self.sock
    }

    /// Gives the connection up without answering anyone (its environment is
    /// gone): what was owed is handed back to be dropped, and the socket is
    /// shut so the server sees it close at once.
    pub fn abandon(&mut self) -> Vec<OnReply> {
        self.broken = true;
        self.out.clear();
        self.sock.shutdown();
        self.pending.drain(..).filter_map(|p| p.on_reply).collect()
    }

    /// Breaks the connection: every reply owed becomes `answer`.
    pub fn fail(&mut self, answer: NodeAnswer, done: &mut Done) {
        self.broken = true;
        self.out.clear();
        for p in self.pending.drain(..) {
            if let Some(on_reply) = p.on_reply {
                done.push((on_reply, Err(answer.clone())));
            }
        }
    }
}
