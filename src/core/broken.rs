//! Deliberately broken variants of the lock, for the fault suite to prove that
//! its checker catches them. Compiled only with the `broken-modes` cargo
//! feature (never in a release build); chosen by `LOCKDOG_BROKEN` at run time.

/// One way to break the lock on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// The correct lock.
    None,
    /// Release with a plain `DEL`, deleting whoever holds the key.
    PlainDel,
    /// Extend with `SET key token PX ttl`, recreating a key that is gone.
    ExtendRecreates,
    /// No clock-drift allowance in the validity.
    NoDrift,
    /// Validity counted from when the replies arrived, not from before sending.
    LateClock,
    /// The watchdog swallows renewal failures and never reports a loss.
    SwallowFailures,
}

#[cfg(feature = "broken-modes")]
pub fn mode() -> Broken {
    use std::sync::LazyLock;
    static MODE: LazyLock<Broken> =
        LazyLock::new(|| match std::env::var("LOCKDOG_BROKEN").as_deref() {
            Ok("plain-del") => Broken::PlainDel,
            Ok("extend-recreates") => Broken::ExtendRecreates,
            Ok("no-drift") => Broken::NoDrift,
            Ok("late-clock") => Broken::LateClock,
            Ok("swallow-failures") => Broken::SwallowFailures,
            _ => Broken::None,
        });
    *MODE
}

#[cfg(not(feature = "broken-modes"))]
#[inline(always)]
pub fn mode() -> Broken {
    Broken::None
}
