//! RESP2 on the JS thread's connections: the bytes of a reply parsed into
//! the operations' [`Reply`], one whole reply at a time (these connections
//! speak RESP2 only). What a command goes out as is in [`owed`](super::owed).

use bytes::{Buf, BytesMut};

use crate::core::ops::Reply;

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
