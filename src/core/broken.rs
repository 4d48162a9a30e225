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
    /// A semaphore's acquire script is told a limit one higher than asked for.
    SemOverLimit,
    /// A semaphore on several nodes takes slots that one node granted: every
    /// node that answered counts once any did.
    SemMinoritySlot,
    /// A fair waiter takes a lock handed to it even after one of its own
    /// attempts found it still waiting (the hand-off was stale by then).
    StaleHandoff,
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
            Ok("sem-over-limit") => Broken::SemOverLimit,
            Ok("sem-minority-slot") => Broken::SemMinoritySlot,
            Ok("stale-handoff") => Broken::StaleHandoff,
            _ => Broken::None,
        });
    *MODE
}

#[cfg(not(feature = "broken-modes"))]
#[inline(always)]
pub fn mode() -> Broken {
    Broken::None
}

/// The clock-drift allowance as the lock uses it (none under `NoDrift`).
pub fn drift(allowance: std::time::Duration) -> std::time::Duration {
    if matches!(mode(), Broken::NoDrift) {
        std::time::Duration::ZERO
    } else {
        allowance
    }
}

/// When an attempt's validity starts counting: before the first request was
/// sent, or (`LateClock`) only once the replies are in.
pub fn validity_start(sent: std::time::Instant) -> std::time::Instant {
    validity_start_at(sent, std::time::Instant::now())
}

/// [`validity_start`] for replies judged at `now`.
pub fn validity_start_at(sent: std::time::Instant, now: std::time::Instant) -> std::time::Instant {
    if matches!(mode(), Broken::LateClock) {
        now
    } else {
        sent
    }
}

/// `SwallowFailures`: a lost lock is kept and renewed as if it were held.
pub fn swallows_losses() -> bool {
    matches!(mode(), Broken::SwallowFailures)
}

/// The limit a semaphore's acquire script enforces (one too many under `SemOverLimit`).
pub fn sem_limit(limit: u32) -> u32 {
    if matches!(mode(), Broken::SemOverLimit) {
        limit.saturating_add(1)
    } else {
        limit
    }
}

/// `SemMinoritySlot`: slots granted by a minority (one node) count.
pub fn slot_minority() -> bool {
    matches!(mode(), Broken::SemMinoritySlot)
}

/// `StaleHandoff`: a fair lock's hand-off is taken whatever came after it.
pub fn trusts_stale_handoffs() -> bool {
    matches!(mode(), Broken::StaleHandoff)
}

/// `PlainDel`: the release as a plain `DEL` of whatever the keys hold.
pub fn release_cmd(keys: &[String]) -> Option<redis::Cmd> {
    (matches!(mode(), Broken::PlainDel)).then(|| {
        let mut del = redis::cmd("DEL");
        del.arg(keys);
        del
    })
}

/// `PlainDel`: a lock whose validity ran out still sends its (plain `DEL`)
/// release, as a naive lock's cleanup does.
pub fn cleans_up_lapsed() -> bool {
    matches!(mode(), Broken::PlainDel)
}

/// `ExtendRecreates`: the extend as an `EVAL` that sets the keys whatever they
/// hold (ARGV: token, ttl), instead of the token-checked script.
pub fn extend_cmd() -> Option<redis::Cmd> {
    (matches!(mode(), Broken::ExtendRecreates)).then(|| {
        let mut eval = redis::cmd("EVAL");
        eval.arg(RECREATE);
        eval
    })
}

/// `ExtendRecreates` for the watchdog's batches: the source of a script taking
/// the renewal script's arguments that sets every key whatever it holds.
pub fn renew_script() -> Option<&'static str> {
    (matches!(mode(), Broken::ExtendRecreates)).then_some(RENEW_RECREATES)
}

const RENEW_RECREATES: &str = "local out, k, a = {}, 1, 2 \
    for l = 1, tonumber(ARGV[1]) do \
      for i = k, k + tonumber(ARGV[a]) - 1 do redis.call('SET', KEYS[i], ARGV[a + 1], 'PX', ARGV[a + 2]) end \
      out[l] = 1 k = k + tonumber(ARGV[a]) a = a + 3 \
    end return out";

const RECREATE: &str =
    "for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end return 1";
