//! A plain master's connection on the JS thread's own loop: [`wire`] (the
//! connection at work: commands corked per loop turn, the socket's reads and
//! writes, deadlines), [`owed`] (a command as it goes out, the replies owed
//! in order, RESP2 read back into the ops' reply), [`resend`] (what a reply
//! makes go again: NOSCRIPT's EVAL, a plain take's PTTL, a refused
//! script-free form), [`socket`] (connect and handshake; a connection made,
//! and given up).

pub mod owed;
pub mod resend;
pub mod socket;
pub mod wire;

pub use owed::{Done, OnReply, Replies};
pub use socket::Socket;
pub use wire::Wire;
