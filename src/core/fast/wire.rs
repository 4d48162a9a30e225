//! One fast connection's transport, free of any event loop: a non-blocking
//! socket, the bytes still to write, and the replies owed in order (a FIFO of
//! callbacks). Whoever polls the socket calls [`Wire::on_readable`] and
//! [`Wire::on_writable`]; [`Wire::expire`] enforces the deadlines.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use redis::{ConnectionAddr, ConnectionInfo, Value, ValueCodec};
use tokio_util::codec::Decoder;

use crate::core::error::NodeAnswer;

/// What a command came back with: a reply, or the node's fault.
pub type Reply = Result<Value, NodeAnswer>;
/// Runs once with the reply of the command it was sent with.
pub type OnReply = Box<dyn FnOnce(Reply)>;
/// Replies to hand out once the connection is no longer borrowed.
pub type Done = Vec<(OnReply, Reply)>;

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

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Socket::Unix(s) => s.read(buf),
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
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

    fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_nonblocking(true),
            #[cfg(unix)]
            Socket::Unix(s) => s.set_nonblocking(true),
        }
    }
}

/// The name a fast connection gives itself (`CLIENT SETNAME`).
pub const CLIENT_NAME: &str = "lockdog-fast";

/// Opens a plain connection to `info` with blocking I/O, all within `timeout`:
/// connect, then AUTH and SELECT as the URL asks. The socket comes back
/// non-blocking, ready to be polled.
pub fn connect(info: &ConnectionInfo, timeout: Duration) -> Result<Socket, String> {
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
    let mut codec = ValueCodec::default();
    let mut buf = BytesMut::with_capacity(256);
    let must = hello.len();
    for (i, cmd) in hello.into_iter().chain([name]).enumerate() {
        sock.set_timeouts(left()).map_err(|e| e.to_string())?;
        write_all(&mut sock, &cmd).map_err(|e| e.to_string())?;
        match read_one(&mut sock, &mut codec, &mut buf)? {
            Value::ServerError(e) if i < must => {
                return Err(format!("{} {}", e.code(), e.details().unwrap_or_default()))
            }
            _ => continue,
        }
    }
    sock.set_nonblocking().map_err(|e| e.to_string())?;
    Ok(sock)
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
fn read_one(
    sock: &mut Socket,
    codec: &mut ValueCodec,
    buf: &mut BytesMut,
) -> Result<Value, String> {
    loop {
        if let Some(v) = codec.decode(buf).map_err(|e| e.to_string())? {
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

/// A command sent, its reply not yet read.
struct Pending {
    deadline: Instant,
    /// `None` once its deadline passed: the reply is read and dropped.
    on_reply: Option<OnReply>,
    /// Sent instead if the node answers NOSCRIPT (an EVAL with the script body).
    retry: Option<Vec<u8>>,
}

/// Replies given up on that a connection may still owe before it is closed.
const MAX_ABANDONED: usize = 10_000;

/// A fast connection: one socket, its replies owed in order.
pub struct Wire {
    sock: Socket,
    out: Vec<u8>,
    inb: BytesMut,
    codec: ValueCodec,
    pending: VecDeque<Pending>,
    abandoned: usize,
    broken: bool,
}

impl Wire {
    pub fn new(sock: Socket) -> Wire {
        Wire {
            sock,
            out: Vec::new(),
            inb: BytesMut::with_capacity(4096),
            codec: ValueCodec::default(),
            pending: VecDeque::new(),
            abandoned: 0,
            broken: false,
        }
    }

    pub fn socket(&self) -> &Socket {
        &self.sock
    }

    /// Cut, timed out or out of step: never used again.
    pub fn is_broken(&self) -> bool {
        self.broken
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

    /// Bytes wait for the socket to take them.
    pub fn wants_write(&self) -> bool {
        !self.out.is_empty()
    }

    /// The earliest deadline of a reply someone waits for.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending
            .iter()
            .filter(|p| p.on_reply.is_some())
            .map(|p| p.deadline)
            .min()
    }

    /// Sends `cmd` (packed); `on_reply` runs with its reply, or with the
    /// node's fault. `retry` is sent instead on a NOSCRIPT reply.
    pub fn send(
        &mut self,
        cmd: &[u8],
        retry: Option<Vec<u8>>,
        deadline: Instant,
        on_reply: OnReply,
        done: &mut Done,
    ) {
        if self.broken {
            done.push((on_reply, Err(cut("the connection is closed"))));
            return;
        }
        self.pending.push_back(Pending {
            deadline,
            on_reply: Some(on_reply),
            retry,
        });
        self.out.extend_from_slice(cmd);
        self.flush(done);
    }

    /// Writes what the socket takes now.
    fn flush(&mut self, done: &mut Done) {
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
    }

    pub fn on_writable(&mut self, done: &mut Done) {
        if !self.broken {
            self.flush(done);
        }
    }

    /// Reads every reply the socket holds and hands each to its command.
    pub fn on_readable(&mut self, done: &mut Done) {
        if self.broken {
            return;
        }
        let mut closed = None;
        loop {
            self.inb.reserve(4096);
            let spare = self.inb.spare_capacity_mut();
            // SAFETY: reading into uninitialised bytes is fine for a socket read,
            // and only the `n` bytes it reports are marked as filled.
            let buf = unsafe {
                std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast::<u8>(), spare.len())
            };
            match self.sock.read(buf) {
                Ok(0) => {
                    closed = Some("the connection was closed by the server".to_string());
                    break;
                }
                Ok(n) => unsafe { self.inb.set_len(self.inb.len() + n) },
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    closed = Some(e.to_string());
                    break;
                }
            }
        }
        let mut resend = false;
        loop {
            match self.codec.decode(&mut self.inb) {
                Ok(Some(value)) => {
                    let Some(p) = self.pending.pop_front() else {
                        self.fail(cut("a reply nobody asked for"), done);
                        return;
                    };
                    let Some(on_reply) = p.on_reply else {
                        self.abandoned = self.abandoned.saturating_sub(1);
                        continue;
                    };
                    match (value, p.retry) {
                        (Value::ServerError(e), Some(eval)) if e.code() == "NOSCRIPT" => {
                            // Nothing ran: send the script itself, answered in turn.
                            self.out.extend_from_slice(&eval);
                            self.pending.push_back(Pending {
                                deadline: p.deadline,
                                on_reply: Some(on_reply),
                                retry: None,
                            });
                            resend = true;
                        }
                        (value, _) => done.push((on_reply, Ok(value))),
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    self.fail(cut(&format!("unreadable reply: {e}")), done);
                    return;
                }
            }
        }
        if let Some(why) = closed {
            self.fail(cut(&why), done);
        } else if resend {
            self.flush(done);
        }
    }

    /// Answers every command past its deadline with a timeout. The connection
    /// stays, in step (their replies are read and dropped), so that what is
    /// sent after a stalled command still runs after it, as on one connection
    /// of the other path: an attempt's undo lands behind the attempt.
    pub fn expire(&mut self, now: Instant, done: &mut Done) {
        for p in self.pending.iter_mut().filter(|p| p.deadline <= now) {
            if let Some(on_reply) = p.on_reply.take() {
                self.abandoned += 1;
                done.push((on_reply, Err(NodeAnswer::Timeout)));
            }
        }
        if self.abandoned > MAX_ABANDONED {
            self.fail(cut("too many replies overdue"), done);
        }
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

fn cut(why: &str) -> NodeAnswer {
    NodeAnswer::Unreachable(why.to_string().into())
}

/// Turns an error reply into the node's answer, worded as on the tokio path.
pub fn error_reply(value: &Value) -> Option<NodeAnswer> {
    match value {
        Value::ServerError(e) => Some(NodeAnswer::ErrorReply(
            format!("{} {}", e.code(), e.details().unwrap_or_default()).into(),
        )),
        _ => None,
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::cell::RefCell;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::rc::Rc;

    use super::*;

    /// A wire on one end of a socket pair; the test plays the server.
    fn pair() -> (Wire, UnixStream) {
        let (a, b) = UnixStream::pair().expect("socketpair");
        a.set_nonblocking(true).expect("nonblocking");
        (Wire::new(Socket::Unix(a)), b)
    }

    type Seen = Rc<RefCell<Vec<(usize, Reply)>>>;

    fn recorder(seen: &Seen, i: usize) -> OnReply {
        let seen = seen.clone();
        Box::new(move |reply| seen.borrow_mut().push((i, reply)))
    }

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    fn run(done: Done) {
        for (f, r) in done {
            f(r)
        }
    }

    fn read_all(server: &mut UnixStream, n: usize) -> Vec<u8> {
        let mut buf = vec![0; n];
        server.read_exact(&mut buf).expect("read");
        buf
    }

    #[test]
    fn replies_go_to_their_commands_in_order_even_in_pieces() {
        let (mut wire, mut server) = pair();
        let seen = Seen::default();
        let mut done = Done::new();
        wire.send(b"A", None, later(), recorder(&seen, 1), &mut done);
        wire.send(b"B", None, later(), recorder(&seen, 2), &mut done);
        assert_eq!(read_all(&mut server, 2), b"AB");
        server.write_all(b":1\r\n:2").expect("write");
        wire.on_readable(&mut done);
        run(std::mem::take(&mut done));
        assert_eq!(seen.borrow().len(), 1);
        server.write_all(b"2\r\n").expect("write");
        wire.on_readable(&mut done);
        run(done);
        let seen = seen.borrow();
        assert!(matches!(seen[0], (1, Ok(Value::Int(1)))));
        assert!(matches!(seen[1], (2, Ok(Value::Int(22)))));
        assert!(wire.is_idle() && !wire.is_broken());
    }

    #[test]
    fn noscript_sends_the_script_itself_once() {
        let (mut wire, mut server) = pair();
        let seen = Seen::default();
        let mut done = Done::new();
        wire.send(
            b"SHA",
            Some(b"EVAL".to_vec()),
            later(),
            recorder(&seen, 1),
            &mut done,
        );
        assert_eq!(read_all(&mut server, 3), b"SHA");
        server
            .write_all(b"-NOSCRIPT No matching script\r\n")
            .expect("write");
        wire.on_readable(&mut done);
        assert!(done.is_empty(), "not answered yet");
        assert_eq!(read_all(&mut server, 4), b"EVAL");
        server.write_all(b":7\r\n").expect("write");
        wire.on_readable(&mut done);
        run(done);
        assert!(matches!(seen.borrow()[0], (1, Ok(Value::Int(7)))));
    }

    #[test]
    fn an_error_reply_is_the_nodes_error() {
        let (mut wire, mut server) = pair();
        let seen = Seen::default();
        let mut done = Done::new();
        wire.send(b"X", None, later(), recorder(&seen, 1), &mut done);
        server.write_all(b"-WRONGTYPE bad\r\n").expect("write");
        wire.on_readable(&mut done);
        run(done);
        let seen = seen.borrow();
        let Ok(value) = &seen[0].1 else {
            panic!("a reply")
        };
        let answer = error_reply(value).expect("an error reply");
        assert!(matches!(&answer, NodeAnswer::ErrorReply(m) if m.text() == "WRONGTYPE bad"));
    }

    #[test]
    fn a_cut_fails_every_command_owed() {
        let (mut wire, server) = pair();
        let seen = Seen::default();
        let mut done = Done::new();
        wire.send(b"A", None, later(), recorder(&seen, 1), &mut done);
        wire.send(b"B", None, later(), recorder(&seen, 2), &mut done);
        drop(server);
        wire.on_readable(&mut done);
        run(done);
        assert!(wire.is_broken());
        let seen = seen.borrow();
        assert_eq!(seen.len(), 2);
        assert!(seen
            .iter()
            .all(|(_, r)| matches!(r, Err(NodeAnswer::Unreachable(_)))));
        let mut done = Done::new();
        wire.send(b"C", None, later(), Box::new(|_| {}), &mut done);
        assert!(matches!(done[0].1, Err(NodeAnswer::Unreachable(_))));
    }

    #[test]
    fn a_deadline_answers_timeout_and_the_connection_stays_in_step() {
        let (mut wire, mut server) = pair();
        let seen = Seen::default();
        let mut done = Done::new();
        let soon = Instant::now() + Duration::from_millis(5);
        wire.send(b"A", None, soon, recorder(&seen, 1), &mut done);
        wire.send(b"B", None, later(), recorder(&seen, 2), &mut done);
        assert_eq!(wire.next_deadline(), Some(soon));
        wire.expire(Instant::now(), &mut done);
        assert!(done.is_empty(), "not due yet");
        wire.expire(soon, &mut done);
        run(std::mem::take(&mut done));
        assert!(matches!(seen.borrow()[0], (1, Err(NodeAnswer::Timeout))));
        assert!(!wire.is_broken());
        assert_eq!(read_all(&mut server, 2), b"AB");
        // The late reply to A is dropped; B gets its own.
        server.write_all(b":1\r\n:2\r\n").expect("write");
        wire.on_readable(&mut done);
        run(done);
        let seen = seen.borrow();
        assert_eq!(seen.len(), 2);
        assert!(matches!(seen[1], (2, Ok(Value::Int(2)))));
        assert!(wire.is_idle());
    }
}
