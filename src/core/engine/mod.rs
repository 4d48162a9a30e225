//! What a client keeps between operations: its shared state and nodes
//! (`inner.rs`), a request checked and a won attempt becoming a held lock
//! (`acquire.rs`), the lines of waiting callers (`line.rs`, `waiters/`), the held lock (`lock.rs`: its
//! handle and state) and how it ends (`ending.rs`: released, handed over,
//! lost, lapsed; `at_quorum.rs`: a release or an extension decided at
//! quorum), the watchdog (`watchdog.rs` schedules, `renew.rs`
//! renews and extends), continuing a lock (`adopt.rs`), semaphores' counts
//! and node health. It runs no acquisition itself: the drivers do.

pub(crate) mod acquire;
pub mod adopt;
pub(crate) mod at_quorum;
pub(crate) mod ending;
pub mod health;
pub(crate) mod inner;
pub(crate) mod line;
pub mod lock;
pub(crate) mod renew;
pub mod semaphore;
pub mod stats;
pub mod waiters;
pub mod watchdog;
