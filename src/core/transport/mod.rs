//! The bytes to and from a node: `tokio/` on the Rust runtime (redis-rs
//! connections: plain, TLS, Sentinel, Cluster, pub/sub, pipelined
//! renewals), `uvloop/` a plain master's socket on the JS thread's loop
//! (connect and handshake, replies owed in order, RESP2).

pub mod tokio;
pub mod uvloop;

#[cfg(test)]
mod agree_tests;
