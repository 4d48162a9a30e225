//! The fast connection's transport against a socket pair (the test plays the server).

use std::cell::RefCell;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::rc::Rc;
use std::time::Duration;

use super::*;
use crate::core::ops::Answer;
use crate::core::transport::uvloop::owed::{Packed, Script};
use crate::core::transport::uvloop::socket::Socket;

/// `call` packed for the one connection it goes to.
fn one(call: &crate::core::ops::call::Call<'_>) -> Packed {
    Packed::One(Script::packed(call))
}

/// A wire on one end of a socket pair; the test plays the server.
fn pair() -> (Wire, UnixStream) {
    let (a, b) = UnixStream::pair().expect("socketpair");
    a.set_nonblocking(true).expect("nonblocking");
    (Wire::new(Socket::Unix(a)), b)
}

type Seen = Rc<RefCell<Vec<(usize, Answer)>>>;

fn recorder(seen: &Seen, i: usize) -> OnReply {
    let seen = seen.clone();
    OnReply::new(move |reply| seen.borrow_mut().push((i, reply)))
}

fn later() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn run(done: Done) {
    for (f, r) in done {
        f.call(r)
    }
}

/// What the server reads once the wire wrote what it corked.
fn read_all(wire: &mut Wire, server: &mut UnixStream, n: usize) -> Vec<u8> {
    let mut done = Done::new();
    wire.write_out(&mut done);
    assert!(done.is_empty(), "the write failed");
    let mut buf = vec![0; n];
    server.read_exact(&mut buf).expect("read");
    buf
}

#[test]
fn replies_go_to_their_commands_in_order_even_in_pieces() {
    let (mut wire, mut server) = pair();
    let seen = Seen::default();
    let mut done = Done::new();
    wire.send(b"A", later(), recorder(&seen, 1), &mut done);
    wire.send(b"B", later(), recorder(&seen, 2), &mut done);
    assert_eq!(read_all(&mut wire, &mut server, 2), b"AB");
    server.write_all(b":1\r\n:2").expect("write");
    wire.on_readable(&mut done);
    run(std::mem::take(&mut done));
    assert_eq!(seen.borrow().len(), 1);
    server.write_all(b"2\r\n").expect("write");
    wire.on_readable(&mut done);
    run(done);
    let seen = seen.borrow();
    assert!(matches!(seen[0], (1, Ok(Reply::Int(1)))));
    assert!(matches!(seen[1], (2, Ok(Reply::Int(22)))));
    assert!(wire.is_idle() && !wire.is_broken());
}

#[test]
fn noscript_sends_the_script_itself_once_per_flush() {
    const SOURCE: &str = "return 7";
    let script = |key: &str| {
        let mut c = redis::cmd("EVALSHA");
        c.arg(redis::Script::new(SOURCE).get_hash()).arg(1).arg(key);
        Packed::One(Script::new(c.get_packed_command(), SOURCE))
    };
    let eval = |key: &str| {
        let mut c = redis::cmd("EVAL");
        c.arg(SOURCE).arg(1).arg(key);
        c.get_packed_command()
    };
    let (mut wire, mut server) = pair();
    let seen = Seen::default();
    let mut done = Done::new();
    // Three calls in flight when the node answers NOSCRIPT to each.
    let calls = [script("a"), script("b"), script("c")];
    let sent: usize = calls.iter().map(|c| c.evalsha().len()).sum();
    for (i, call) in calls.iter().enumerate() {
        wire.send_script(call.clone(), later(), recorder(&seen, i + 1), &mut done);
    }
    assert_eq!(read_all(&mut wire, &mut server, sent).len(), sent);
    server
        .write_all(&b"-NOSCRIPT No matching script\r\n".repeat(3))
        .expect("write");
    wire.on_readable(&mut done);
    assert!(done.is_empty(), "not answered yet");
    // The first goes again with the script itself, the others as EVALSHA behind it.
    let again = [
        eval("a"),
        calls[1].evalsha().to_vec(),
        calls[2].evalsha().to_vec(),
    ]
    .concat();
    assert_eq!(read_all(&mut wire, &mut server, again.len()), again);
    server.write_all(b":7\r\n:8\r\n:9\r\n").expect("write");
    wire.on_readable(&mut done);
    run(done);
    let seen = seen.borrow();
    assert!(matches!(seen[0], (1, Ok(Reply::Int(7)))));
    assert!(matches!(seen[2], (3, Ok(Reply::Int(9)))));
}

#[test]
fn an_error_reply_is_the_nodes_error() {
    let (mut wire, mut server) = pair();
    let seen = Seen::default();
    let mut done = Done::new();
    wire.send(b"X", later(), recorder(&seen, 1), &mut done);
    server.write_all(b"-WRONGTYPE bad\r\n").expect("write");
    wire.on_readable(&mut done);
    run(done);
    let seen = seen.borrow();
    let Ok(value) = &seen[0].1 else {
        panic!("a reply")
    };
    assert!(matches!(value, Reply::Error(m) if m.text() == "WRONGTYPE bad"));
}

#[test]
fn a_cut_fails_every_command_owed() {
    let (mut wire, server) = pair();
    let seen = Seen::default();
    let mut done = Done::new();
    wire.send(b"A", later(), recorder(&seen, 1), &mut done);
    wire.send(b"B", later(), recorder(&seen, 2), &mut done);
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
    wire.send(b"C", later(), OnReply::new(|_| {}), &mut done);
    assert!(matches!(done[0].1, Err(NodeAnswer::Unreachable(_))));
}

#[test]
fn a_deadline_answers_timeout_and_the_connection_stays_in_step() {
    let (mut wire, mut server) = pair();
    let seen = Seen::default();
    let mut done = Done::new();
    let soon = Instant::now() + Duration::from_millis(5);
    wire.send(b"A", soon, recorder(&seen, 1), &mut done);
    wire.send(b"B", later(), recorder(&seen, 2), &mut done);
    // Not written yet: bounded from when it began to wait for the socket.
    let due = wire.next_deadline().expect("a deadline");
    assert!(due <= soon && due + Duration::from_millis(5) > soon);
    assert_eq!(read_all(&mut wire, &mut server, 2), b"AB");
    // Written: its bound (5 ms) runs from the write.
    let due = wire.next_deadline().expect("a deadline");
    wire.expire(Instant::now(), &mut done);
    assert!(done.is_empty(), "not due yet");
    wire.expire(due, &mut done);
    run(std::mem::take(&mut done));
    assert!(matches!(seen.borrow()[0], (1, Err(NodeAnswer::Timeout))));
    assert!(!wire.is_broken());
    // The late reply to A is dropped; B gets its own.
    server.write_all(b":1\r\n:2\r\n").expect("write");
    wire.on_readable(&mut done);
    run(done);
    let seen = seen.borrow();
    assert_eq!(seen.len(), 2);
    assert!(matches!(seen[1], (2, Ok(Reply::Int(2)))));
    assert!(wire.is_idle());
}

#[test]
fn commands_are_corked_until_written_out_or_a_burst_is_large() {
    let (mut wire, mut server) = pair();
    server.set_nonblocking(true).expect("nonblocking");
    let seen = Seen::default();
    let mut done = Done::new();
    wire.send(b"A", later(), recorder(&seen, 1), &mut done);
    wire.send(b"B", later(), recorder(&seen, 2), &mut done);
    assert!(wire.has_unsent() && !wire.wants_write());
    let mut buf = [0u8; 8];
    assert!(
        server.read(&mut buf).is_err(),
        "nothing written before write_out"
    );
    wire.write_out(&mut done);
    assert!(!wire.has_unsent());
    assert_eq!(server.read(&mut buf).expect("read"), 2);
    assert_eq!(&buf[..2], b"AB");
    // A burst past EARLY_WRITE goes at once.
    let big = vec![b'x'; EARLY_WRITE];
    wire.send(&big, later(), recorder(&seen, 3), &mut done);
    assert!(!wire.has_unsent());
    let mut got = vec![0u8; EARLY_WRITE];
    server.set_nonblocking(false).expect("blocking");
    server.read_exact(&mut got).expect("read");
    assert!(done.is_empty());
}

#[test]
fn a_socket_that_takes_only_part_waits_to_be_writable() {
    let (mut wire, _server) = pair();
    let mut done = Done::new();
    // Far more than a socket pair buffers: the rest waits for writable.
    let big = vec![b'x'; 8 * 1024 * 1024];
    wire.send(&big, later(), OnReply::new(|_| {}), &mut done);
    assert!(wire.wants_write(), "blocked: the poll asks for writable");
    assert!(
        !wire.has_unsent(),
        "not corked again: on_writable writes the rest"
    );
    assert!(done.is_empty() && !wire.is_broken());
}

#[test]
fn a_bound_runs_from_the_write_not_from_the_queue() {
    let (mut wire, mut server) = pair();
    let seen = Seen::default();
    let mut done = Done::new();
    let queued = Instant::now();
    wire.send(
        b"A",
        queued + Duration::from_millis(5),
        recorder(&seen, 1),
        &mut done,
    );
    // The thread was busy 20 ms before its loop wrote anything: at the
    // sweep the command is written first, and not given up on.
    std::thread::sleep(Duration::from_millis(20));
    wire.expire(Instant::now(), &mut done);
    assert!(
        done.is_empty(),
        "written at the sweep, its bound from there"
    );
    let mut buf = [0; 1];
    server.read_exact(&mut buf).expect("read");
    assert_eq!(&buf, b"A");
    server.write_all(b":1\r\n").expect("write");
    // Replies that came while the thread was busy are read before any is given up on.
    std::thread::sleep(Duration::from_millis(20));
    wire.on_readable(&mut done);
    run(done);
    assert!(matches!(seen.borrow()[0], (1, Ok(Reply::Int(1)))));
}

#[test]
fn a_command_the_socket_does_not_take_is_still_bounded() {
    let (mut wire, _server) = pair();
    let seen = Seen::default();
    let mut done = Done::new();
    // More than the socket buffers hold, and a server that never reads.
    let big = vec![b'x'; 8 << 20];
    let bound = Duration::from_millis(20);
    wire.send(&big, Instant::now() + bound, recorder(&seen, 1), &mut done);
    wire.send(b"B", Instant::now() + bound, recorder(&seen, 2), &mut done);
    wire.write_out(&mut done);
    assert!(wire.wants_write(), "the socket took only part");
    std::thread::sleep(bound + Duration::from_millis(5));
    wire.expire(Instant::now(), &mut done);
    run(done);
    let seen = seen.borrow();
    assert_eq!(seen.len(), 2, "both given up on");
    assert!(seen
        .iter()
        .all(|(_, r)| matches!(r, Err(NodeAnswer::Timeout))));
}

#[test]
fn a_plain_take_sends_its_pttl_only_when_the_set_answers_nil() {
    use crate::core::ops::call::Call;
    let (mut wire, mut server) = pair();
    let seen = Seen::default();
    let mut done = Done::new();
    let (won, taken) = (
        Call::plain_take("k", "t", 30),
        Call::plain_take("{a}:b", "u", 30),
    );
    let (won, taken_script) = (one(&won), one(&taken));
    let pttl = taken.on_nil().expect("a PTTL");
    assert_eq!(
        taken_script.on_nil(),
        Some(pttl.clone()),
        "read off the SET's bytes"
    );
    let sent = won.evalsha().len() + taken_script.evalsha().len();
    wire.send_script(won.clone(), later(), recorder(&seen, 1), &mut done);
    wire.send_script(taken_script, later(), recorder(&seen, 2), &mut done);
    wire.send(b"P", later(), recorder(&seen, 3), &mut done);
    let bytes = read_all(&mut wire, &mut server, sent + 1);
    assert!(bytes.starts_with(b"*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nt\r\n$2\r\nNX\r\n$2\r\nPX\r\n$2\r\n30\r\n*6\r\n$3\r\nSET\r\n"));
    server.write_all(b"+OK\r\n$-1\r\n+PONG\r\n").expect("write");
    wire.on_readable(&mut done);
    run(std::mem::take(&mut done));
    // The taken key's PTTL went out after what was already sent.
    assert_eq!(read_all(&mut wire, &mut server, pttl.len()), pttl);
    server.write_all(b":1500\r\n").expect("write");
    wire.on_readable(&mut done);
    run(done);
    let seen = seen.borrow();
    assert_eq!(seen.len(), 3);
    assert!(matches!(&seen[0], (1, Ok(Reply::Status(s))) if s == "OK"));
    assert!(matches!(&seen[1], (3, Ok(Reply::Status(s))) if s == "PONG"));
    assert!(
        matches!(&seen[2], (2, Ok(Reply::Array(pair))) if matches!(pair.as_slice(), [Reply::Nil, Reply::Int(1500)])),
        "{seen:?}"
    );
    assert!(wire.is_idle());
}

#[test]
fn a_plain_take_given_up_on_sends_no_pttl() {
    use crate::core::ops::call::Call;
    let (mut wire, mut server) = pair();
    let seen = Seen::default();
    let mut done = Done::new();
    let take = one(&Call::plain_take("k", "t", 30));
    let sent = take.evalsha().len();
    let soon = Instant::now() + Duration::from_millis(1);
    wire.send_script(take, soon, recorder(&seen, 1), &mut done);
    wire.send(b"P", later(), recorder(&seen, 2), &mut done);
    read_all(&mut wire, &mut server, sent + 1);
    wire.expire(Instant::now() + Duration::from_secs(1), &mut done);
    run(std::mem::take(&mut done));
    server.write_all(b"$-1\r\n+PONG\r\n").expect("write");
    wire.on_readable(&mut done);
    run(std::mem::take(&mut done));
    wire.write_out(&mut done);
    server.set_nonblocking(true).expect("nonblocking");
    let mut more = [0u8; 16];
    assert!(server.read(&mut more).is_err(), "nothing more was sent");
    let seen = seen.borrow();
    assert!(matches!(&seen[0], (1, Err(NodeAnswer::Timeout))));
    assert!(
        matches!(&seen[1], (2, Ok(Reply::Status(s))) if s == "PONG"),
        "{seen:?}"
    );
    assert!(wire.is_idle());
}

/// A connection to a server with DELIFEQ and SET … IFEQ (made before a
/// call is packed: calls carry their script-free form once some connection
/// could use it).
fn valkey_pair() -> (Wire, UnixStream) {
    use crate::core::ops::script_free::Server;
    let (mut wire, server) = pair();
    wire.serves(Server {
        del_if_eq: true,
        set_if_eq: true,
    });
    (wire, server)
}

#[test]
fn an_unlock_goes_without_its_script_where_the_server_has_delifeq() {
    use crate::core::ops::call::Call;
    let (mut wire, valkey) = valkey_pair();
    let unlock = one(&Call::unlock("k", "t", "ch:"));
    let mut pipe = redis::pipe();
    pipe.cmd("DELIFEQ").arg("k").arg("t");
    pipe.cmd("PUBLISH").arg("ch:k").arg("t");
    let free = pipe.get_packed_pipeline();
    // A server without it: the script.
    let (mut plain, mut server) = pair();
    let seen = Seen::default();
    let mut done = Done::new();
    plain.send_script(unlock.clone(), later(), recorder(&seen, 0), &mut done);
    let n = unlock.evalsha().len();
    assert_eq!(read_all(&mut plain, &mut server, n), unlock.evalsha());
    // With it: DELIFEQ and the notice, answered as one array.
    let mut server = valkey;
    wire.send_script(unlock.clone(), later(), recorder(&seen, 1), &mut done);
    assert_eq!(read_all(&mut wire, &mut server, free.len()), free);
    server.write_all(b":1\r\n:0\r\n").expect("write");
    wire.on_readable(&mut done);
    run(std::mem::take(&mut done));
    let got = seen.borrow_mut().pop();
    assert!(
        matches!(&got, Some((1, Ok(Reply::Array(two)))) if matches!(two.as_slice(), [Reply::Int(1), Reply::Int(0)])),
        "{got:?}"
    );
    // A refusal (no right to DELIFEQ) goes again as the script, and the
    // connection sends scripts from then on.
    wire.send_script(unlock.clone(), later(), recorder(&seen, 2), &mut done);
    read_all(&mut wire, &mut server, free.len());
    server
        .write_all(b"-NOPERM this user has no permissions to run the 'delifeq' command\r\n:0\r\n")
        .expect("write");
    wire.on_readable(&mut done);
    assert!(done.is_empty(), "nobody is answered by the refusal");
    assert_eq!(read_all(&mut wire, &mut server, n), unlock.evalsha());
    server.write_all(b":1\r\n").expect("write");
    wire.on_readable(&mut done);
    run(std::mem::take(&mut done));
    assert!(matches!(
        seen.borrow_mut().pop(),
        Some((2, Ok(Reply::Int(1))))
    ));
    wire.send_script(unlock.clone(), later(), recorder(&seen, 3), &mut done);
    assert_eq!(read_all(&mut wire, &mut server, n), unlock.evalsha());
}

#[test]
fn an_extend_goes_as_set_ifeq_and_a_key_of_another_type_as_the_script() {
    use crate::core::ops::call::Call;
    let (mut wire, mut server) = valkey_pair();
    let seen = Seen::default();
    let mut done = Done::new();
    let extend = one(&Call::prolong("k", "t", 30_000));
    let free = redis::cmd("SET")
        .arg("k")
        .arg("t")
        .arg("IFEQ")
        .arg("t")
        .arg("PX")
        .arg(30_000u64)
        .get_packed_command();
    wire.send_script(extend.clone(), later(), recorder(&seen, 1), &mut done);
    assert_eq!(read_all(&mut wire, &mut server, free.len()), free);
    server
        .write_all(b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n")
        .expect("write");
    wire.on_readable(&mut done);
    assert!(done.is_empty());
    let n = extend.evalsha().len();
    assert_eq!(read_all(&mut wire, &mut server, n), extend.evalsha());
    server.write_all(b":0\r\n").expect("write");
    wire.on_readable(&mut done);
    run(std::mem::take(&mut done));
    assert!(matches!(
        seen.borrow_mut().pop(),
        Some((1, Ok(Reply::Int(0))))
    ));
    // Another type of key says nothing of the server: the next goes script-free.
    wire.send_script(extend.clone(), later(), recorder(&seen, 2), &mut done);
    assert_eq!(read_all(&mut wire, &mut server, free.len()), free);
    // Its answer: OK, or nil.
    server.write_all(b"$-1\r\n").expect("write");
    wire.on_readable(&mut done);
    run(done);
    assert!(matches!(seen.borrow_mut().pop(), Some((2, Ok(Reply::Nil)))));
}
