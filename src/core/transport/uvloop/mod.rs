//! A plain master's connection on the JS thread's own loop: [`socket`]
//! (connect and handshake; RESP2 into the ops' reply), [`wire`] (commands
//! corked per loop turn, the socket's reads and writes, deadlines), [`owed`]
//! (a command as it goes out, the replies owed in order, what goes again:
//! NOSCRIPT, a plain take's PTTL).

pub mod owed;
pub mod socket;
pub mod wire;

pub use owed::{Done, OnReply, Replies};
pub use socket::Socket;
pub use wire::Wire;
