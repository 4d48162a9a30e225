//! A plain master's connection on the JS thread's own loop: [`socket`]
//! (connect and handshake), [`wire`] (commands corked per loop turn,
//! replies owed in order, deadlines, NOSCRIPT), [`resp`] (RESP2 into the
//! ops' reply).

pub mod resp;
pub mod socket;
pub mod wire;

pub use socket::Socket;
pub use wire::{Done, OnReply, Replies, Wire};
