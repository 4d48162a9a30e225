//! What a server with commands beyond Redis 6.2's takes in place of a
//! script: `DELIFEQ` for a lock of one key's release (Valkey 9.0), `SET …
//! IFEQ … PX` for its extension (Valkey 8.1), learnt per connection from
//! `INFO server` ([`Server::of_info`]); elsewhere the scripts.

use super::call::{bulk, header, Call, Form};
use super::scripts::{EXTEND, RELEASE};

/// The commands a server has beyond Redis 6.2's that a call may use in
/// place of its script, learnt per connection (see [`Server::of_info`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Server {
    /// `DELIFEQ key value` (Valkey 9.0).
    pub del_if_eq: bool,
    /// `SET key value IFEQ value PX ms` (Valkey 8.1).
    pub set_if_eq: bool,
}

impl Server {
    /// What `INFO server`'s text shows: Valkey's `valkey_version`.
    pub fn of_info(info: &str) -> Server {
        let version = info
            .lines()
            .find_map(|l| l.trim().strip_prefix("valkey_version:"))
            .map(|v| {
                let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
                (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
            });
        match version {
            Some(v) => Server {
                del_if_eq: v >= (9, 0),
                set_if_eq: v >= (8, 1),
            },
            None => Server::default(),
        }
    }
}

impl Server {
    /// A server with every command of `needs`.
    pub fn has(self, needs: Server) -> bool {
        (self.del_if_eq || !needs.del_if_eq) && (self.set_if_eq || !needs.set_if_eq)
    }
}

/// A call's commands without its script, for a server that has them.
#[derive(Debug, Clone)]
pub struct ScriptFree {
    pub bytes: Vec<u8>,
    /// How many replies answer them (handed on as one array when two).
    pub replies: u8,
    /// What a server needs to take them.
    pub needs: Server,
}

impl Call<'_> {
    /// The release script for one key held by `token` (announced on
    /// `channel_prefix` + key, none when empty), or, on a server with
    /// `DELIFEQ`, `DELIFEQ key token` followed by that `PUBLISH`: the
    /// notice goes whether or not the key was still this token's (a
    /// waiter woken for nothing tries and waits again).
    pub fn unlock(key: &str, token: &str, channel_prefix: &str) -> Call<'static> {
        let mut call = Call::new(&RELEASE);
        call.key(key).arg(token).arg(channel_prefix);
        call.form = Form::Unlock;
        call
    }

    /// The extend script for one key held by `token`, to `ttl_ms`; on a
    /// server with `SET … IFEQ`, `SET key token IFEQ token PX ttl_ms`
    /// (answered OK, or nil when the key is not this token's: never made).
    pub fn prolong(key: &str, token: &str, ttl_ms: u64) -> Call<'static> {
        let mut call = Call::new(&EXTEND);
        call.key(key)
            .arg(token)
            .arg(itoa::Buffer::new().format(ttl_ms));
        call.form = Form::Prolong;
        call
    }

    /// The call's commands for a server that has the commands they need,
    /// when they stand for its script there.
    pub fn script_free(&self) -> Option<ScriptFree> {
        if matches!(self.form, Form::Script | Form::Take) {
            return None;
        }
        let key = self.key_parts().next()?;
        let mut args = self.arg_parts();
        let token = args.next()?;
        let second = args.next()?;
        let mut bytes = Vec::with_capacity(48 + 2 * (key.len() + token.len()) + second.len());
        let (replies, needs) = match self.form {
            Form::Unlock => {
                header(&mut bytes, b'*', 3);
                bulk(&mut bytes, b"DELIFEQ");
                bulk(&mut bytes, key);
                bulk(&mut bytes, token);
                let needs = Server {
                    del_if_eq: true,
                    set_if_eq: false,
                };
                if second.is_empty() {
                    (1, needs)
                } else {
                    header(&mut bytes, b'*', 3);
                    bulk(&mut bytes, b"PUBLISH");
                    header(&mut bytes, b'$', second.len() + key.len());
                    bytes.extend_from_slice(second);
                    bytes.extend_from_slice(key);
                    bytes.extend_from_slice(b"\r\n");
                    bulk(&mut bytes, token);
                    (2, needs)
                }
            }
            Form::Prolong => {
                header(&mut bytes, b'*', 7);
                bulk(&mut bytes, b"SET");
                bulk(&mut bytes, key);
                bulk(&mut bytes, token);
                bulk(&mut bytes, b"IFEQ");
                bulk(&mut bytes, token);
                bulk(&mut bytes, b"PX");
                bulk(&mut bytes, second);
                let needs = Server {
                    del_if_eq: false,
                    set_if_eq: true,
                };
                (1, needs)
            }
            Form::Script | Form::Take => return None,
        };
        Some(ScriptFree {
            bytes,
            replies,
            needs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ops::scripts::source;

    #[test]
    fn a_server_is_known_by_its_info() {
        let info = |v: &str| {
            format!("# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:{v}\r\nredis_mode:standalone\r\n")
        };
        let both = Server {
            del_if_eq: true,
            set_if_eq: true,
        };
        assert_eq!(Server::of_info(&info("9.1.2")), both);
        assert_eq!(Server::of_info(&info("10.0.0")), both);
        let set_only = Server {
            del_if_eq: false,
            set_if_eq: true,
        };
        assert_eq!(Server::of_info(&info("8.1.8")), set_only);
        assert_eq!(Server::of_info(&info("8.0.2")), Server::default());
        assert_eq!(
            Server::of_info("# Server\r\nredis_version:7.0.15\r\n"),
            Server::default()
        );
        assert_eq!(Server::of_info(""), Server::default());
        assert!(both.has(set_only) && !set_only.has(both) && set_only.has(Server::default()));
    }

    #[test]
    fn an_unlock_and_a_prolong_are_their_scripts_or_the_servers_commands() {
        let unlock = Call::unlock("k", "t", "ch:");
        let mut script = Call::new(&RELEASE);
        script.key("k").arg("t").arg("ch:");
        assert_eq!(unlock.evalsha(), script.evalsha());
        assert_eq!(unlock.source(), Some(source::RELEASE));
        let free = unlock.script_free().expect("script-free");
        assert_eq!(
            (free.replies, free.needs.del_if_eq, free.needs.set_if_eq),
            (2, true, false)
        );
        let mut pipe = redis::pipe();
        pipe.cmd("DELIFEQ").arg("k").arg("t");
        pipe.cmd("PUBLISH").arg("ch:k").arg("t");
        assert_eq!(free.bytes, pipe.get_packed_pipeline());
        // No notice: DELIFEQ alone.
        let quiet = Call::unlock("k", "t", "")
            .script_free()
            .expect("script-free");
        let alone = redis::cmd("DELIFEQ").arg("k").arg("t").get_packed_command();
        assert_eq!((quiet.replies, quiet.bytes), (1, alone));
        let prolong = Call::prolong("k", "t", 30_000);
        let mut script = Call::new(&EXTEND);
        script.key("k").arg("t").arg(30_000u64);
        assert_eq!(prolong.evalsha(), script.evalsha());
        let free = prolong.script_free().expect("script-free");
        assert_eq!(
            (free.replies, free.needs.del_if_eq, free.needs.set_if_eq),
            (1, false, true)
        );
        let set = redis::cmd("SET")
            .arg("k")
            .arg("t")
            .arg("IFEQ")
            .arg("t")
            .arg("PX")
            .arg(30_000u64)
            .get_packed_command();
        assert_eq!(free.bytes, set);
        assert!(
            script.script_free().is_none() && Call::plain_take("k", "t", 1).script_free().is_none()
        );
    }
}
