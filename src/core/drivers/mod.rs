//! The two drivers of the acquisition machine (`ops/acquisition`) and of the
//! other operations: `tokio.rs` runs an acquisition in a task on the Rust
//! runtime's connections; `uvloop/` runs it on the JS thread's own loop,
//! fed one reply at a time by whoever owns the sockets. Both carry no rules
//! of their own: the machine and `ops/` decide.

pub mod tokio;
pub mod uvloop;
