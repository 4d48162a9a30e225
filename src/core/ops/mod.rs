//! The lock operations, each written once as a sans-I/O step: what to send
//! (a [`Call`](crate::core::ops::call::Call) of a script, which both transports
//! write), the replies in, one node's [`Reply`] at a time, and the outcome
//! once decided. No sockets, no tasks, no clock: the time an outcome depends
//! on (`now`) is an argument.
//!
//! Two drivers run them (`drivers/`) over two transports (`transport/`):
//! tokio's redis-rs connections, which turn a `redis::Value` into a
//! [`Reply`], and the JS thread's loop, which parses the RESP bytes into one. NOSCRIPT is the
//! transports' business (the EVAL sent again once); an operation never
//! sees it unless that failed too.
//!
//! `release`, `extend` (a manual extension), `renew` (the watchdog's
//! batches), `permits` (semaphores and fair lines); `acquisition` a whole
//! acquisition of any kind of lock, attempts (an acquire's call, reply
//! reading and verdict at quorum: `acquisition/plan.rs`), undos and waits,
//! as one machine; `gather` holds an operation's answers so far
//! and hands back those that come after its outcome (the driver records
//! them with the lock); `scripts` embeds every Lua script once, `call` packs a call of one, and
//! `script_free` what a server with the commands for it takes instead.
//! `transport/agree_tests.rs` feeds both transports the same replies and
//! checks that every operation comes to the same outcome.

pub mod acquisition;
pub mod call;
pub mod extend;
pub mod gather;
pub mod permits;
pub mod release;
pub mod renew;
pub mod script_free;
pub mod scripts;

pub use gather::{
    Answer, Answers, Gather, KeepsAnswers, LateAnswers, Progress, Reply, SharedAnswers,
};
