'use strict'

// The JS `Lock`: a view of the native lock, which JS knows by its id. Key,
// token, validity, status and what ended it (a loss found by a renewal or by
// a release, or its client's close) are the native lock's; this object adds
// what only JS can hold: the AbortSignal and the `onLost` callback, told once.
// The native lock lives until this object is collected (`forgetting`).
// Here too: how a lock is taken natively, and the table in which a client
// finds its live Locks by their native ids.

const native = require('../binding.js')
const { LockError, withStack, invalidType } = require('./errors')
const { hot, kLock, kReport, kForget, kEnd, kEnded, kLost, channels, rethrowLater } = require('./internal')

/**
 * Lets the native locks go once their `Lock`s are collected (a lock still
 * held then expires by TTL): the ids of one collection in one call.
 */
let forgotten = []
const forgetting = new FinalizationRegistry((id) => {
  if (forgotten.push(id) === 1) queueMicrotask(forgetCollected)
})
function forgetCollected() {
  const ids = Float64Array.from(forgotten)
  forgotten = []
  native.forgetLocks(ids)
}

/**
 * Takes a lock on the native `client`: on one key, with no cancel handle and no other kind,
 * by the JS thread's own acquire when the client has one (`hotKey`).
 */
function acquireNative(client, hotKey, keys, packed, cancel, kind) {
  if (hotKey !== null && keys.length === 1 && cancel === null && kind === undefined) return hot.acquire(hotKey, keys[0], packed)
  return client.acquire(keys, packed, cancel, kind)
}

/**
 * A client's held locks by native id, held weakly so a native loss event finds
 * its Lock without keeping it alive. Swept of collected locks as it grows
 * (cheaper per lock than a FinalizationRegistry).
 */
class LiveLocks {
  #refs = new Map()
  #sweepAt = 1024

  add(id, lock) {
    this.#refs.set(id, new WeakRef(lock))
    if (this.#refs.size < this.#sweepAt) return
    for (const [k, ref] of this.#refs) if (ref.deref() === undefined) this.#refs.delete(k)
    this.#sweepAt = Math.max(1024, 2 * this.#refs.size)
  }

  /** The Lock of `id` if it is still reachable; forgets it either way. */
  take(id) {
    const ref = this.#refs.get(id)
    this.#refs.delete(id)
    return ref && ref.deref()
  }

  delete(id) {
    this.#refs.delete(id)
  }

  /** Every Lock still reachable. */
  * [Symbol.iterator]() {
    for (const ref of this.#refs.values()) {
      const lock = ref.deref()
      if (lock) yield lock
    }
  }
}

/** A held lock. Created by `LockClient#acquire`; renewed natively until released. */
class Lock {
  /** The native lock's id (the client's loss events name it). */
  #id
  #controller = null
  #onLost
  /** What ended the lock before its holder let go (loss or close), as told: one object for every reader. */
  #ending = null
  /** The client: a lock that can still be reached keeps its client (and so its loss events) alive. */
  #client
  #delivered = false

  constructor(id, onLost, client) {
    this.#id = id
    this.#onLost = onLost
    this.#client = client
    forgetting.register(this, id)
  }

  /** The lock's first key (without the client's keyPrefix). */
  get key() {
    return native.lockKey(this.#id)
  }
  /** Every key this lock holds. */
  get keys() {
    return native.lockKeys(this.#id)
  }
  /** The random value stored under the key. */
  get token() {
    return native.lockToken(this.#id)
  }
  /** Milliseconds of validity left, by the local monotonic clock (synchronous). */
  get remaining() {
    return native.lockRemaining(this.#id)
  }
  /** True while held and within validity. */
  get held() {
    return native.lockHeld(this.#id)
  }
  /**
   * 'held', 'released', 'lost' (also once its validity ran out, and when a
   * release found the key gone or another owner's) or 'handed-over' (see
   * `handOver`).
   */
  get status() {
    return native.lockStatus(this.#id)
  }
  /** The lease length renewals restore, in ms. */
  get ttl() {
    return native.lockTtl(this.#id)
  }
  /** Attempts the acquisition took. */
  get attempts() {
    return native.lockAttempts(this.#id)
  }
  /**
   * Each node's answer to the lock's last acquisition, extension or release
   * (`{ node, answer, detail }`); `pending` for a node that had not answered
   * when it resolved, final once `client.settled()` resolved.
   */
  get nodes() {
    return native.lockNodes(this.#id)
  }
  /** The fencing token (client option `fencing`), or null. */
  get fence() {
    return native.lockFence(this.#id)
  }
  /** Replicas that acknowledged the last acquisition or extension (option `waitReplicas`), or null. */
  get replicas() {
    return native.lockReplicas(this.#id) ?? null
  }
  /** The `LockError` (ERR_LOCK_LOST) the lock was lost with, or null. */
  get lossError() {
    const end = this.#recordedEnd()
    if (end) return end.code === 'ERR_LOCK_LOST' ? end : null
    // Only the clock tells yet: the native lock builds one at each read.
    return native.lockLoss(this.#id)
  }

  /** Aborts with a `LockError` (code ERR_LOCK_LOST, or ERR_LOCK_CLOSED) when the lock is lost or its client closed. */
  get signal() {
    if (!this.#controller) {
      this.#controller = new AbortController()
      // Whoever holds the signal keeps the lock reachable, so it is not
      // collected (and its renewal stopped) while work still listens to it.
      this.#controller.signal[kLock] = this
      const ended = this.#recordedEnd()
      if (ended) this.#controller.abort(ended)
    }
    return this.#controller.signal
  }

  /** Extends the lease to `ttl` ms from now (same token). */
  extend(ttl = this.ttl) {
    if (typeof ttl !== 'number') throw invalidType('ttl', 'of type number', ttl)
    let p
    try {
      p = native.extendLock(this.#id, ttl)
    } catch (e) {
      const err = withStack(e)
      if (err instanceof LockError) return Promise.reject(err)
      throw err
    }
    return p.catch((e) => {
      throw withStack(e)
    })
  }

  /**
   * Lets go of the lock without releasing it, for another client or process
   * to continue with `adopt(info.keys, info.token)`: the watchdog stops
   * renewing, the keys keep their lease (`remaining` ms), and this Lock never
   * deletes them afterwards (`release()` resolves false; no loss is reported,
   * no cleanup is sent). Throws ERR_LOCK_LOST when the lock is no longer held.
   * Returns `{ key, keys, token, remaining, fence }`.
   */
  handOver() {
    this.#deliverEnd()
    let info
    try {
      info = native.handOverLock(this.#id)
    } catch (e) {
      throw withStack(e)
    }
    this.#client[kForget](this.#id)
    return { key: info.key, keys: info.keys, token: info.token, remaining: info.remaining, fence: info.fence ?? null }
  }

  /**
   * Releases the lock (the watchdog stops first). Resolves true if it was ours
   * and is gone now, false if it was not: already released, or lost. A release
   * that finds the key gone or held by another owner is a loss: it is reported
   * like one found by a renewal (the signal aborts, `onLost` runs, the client
   * emits 'lost') and `withLock` rejects with ERR_LOCK_LOST.
   */
  release() {
    const released = (hot ? hot.release(this.#id) : native.releaseLock(this.#id)).then(
      (out) => {
        if (out === true) {
          // Released: no loss event needs to find this lock any more.
          this.#client[kForget](this.#id)
          return true
        }
        if (out instanceof Error) {
          // The loss this release found (the native lock records it):
          // reported here, before the release resolves, as a renewal's would be.
          this.#client[kForget](this.#id)
          this.#client[kReport](withStack(out), this)
          return false
        }
        // Not held: released or handed over before, or ended natively (a
        // loss, or close()) before this release. That end is told now; a
        // loss's event, if still queued, finds this lock and forgets it.
        this.#deliverEnd()
        return false
      },
      (e) => {
        throw withStack(e)
      },
    )
    if (!channels.release.hasSubscribers) return released
    return released.then((ok) => {
      channels.release.publish({ key: this.key, keys: this.keys, token: this.token, released: ok })
      return ok
    })
  }

  /** What ended the lock as the native side recorded it (not a loss only the clock tells yet), or null. */
  #recordedEnd() {
    if (!this.#ending && native.lockEnded(this.#id)) this.#ending = native.lockEnding(this.#id)
    return this.#ending
  }

  /** Tells the signal and onLost what ended the lock, once the native side recorded it; once. */
  #deliverEnd() {
    if (this.#delivered) return
    const end = this.#recordedEnd()
    if (end) this.#end(end)
  }

  async [Symbol.asyncDispose]() {
    await this.release()
  }

  /** @internal the error that ended the lock before its holder released it (loss or close), or null. */
  [kEnd]() {
    return this.#ending
  }

  /** @internal called by the client once `close()` ended the locks it held. */
  [kEnded]() {
    this.#deliverEnd()
  }

  /** @internal called by the client when a loss of this lock is reported. */
  [kLost](err) {
    if (this.#delivered) return
    this.#ending = err
    this.#end(err)
  }

  #end(err) {
    this.#delivered = true
    if (this.#controller && !this.#controller.signal.aborted) this.#controller.abort(err)
    if (this.#onLost) {
      try {
        this.#onLost(err, this)
      } catch (e) {
        rethrowLater(e)
      }
    }
  }
}

/**
 * Waits for `acquiring`, runs `fn(signal, lock)`, and always releases.
 * Resolves what `fn` resolves; rejects with the loss or close that ended the
 * lock meanwhile (its `cause` fn's result or error), else with fn's error, else
 * with the release's error (its `result` fn's result).
 */
async function runHolding(acquiring, fn) {
  const lock = await acquiring
  let result
  let error
  let failed = false
  try {
    result = await fn(lock.signal, lock)
  } catch (e) {
    failed = true
    error = e
  }
  const before = lock.status === 'lost' ? lock.lossError : null
  let releaseError = null
  try {
    await lock.release()
  } catch (e) {
    releaseError = e
  }
  const ended = before || lock[kEnd]()
  if (ended) {
    throw new LockError(ended.code, ended.message, { ...ended, cause: failed ? error : result })
  }
  if (failed) throw error
  if (releaseError) {
    releaseError.result = result
    throw releaseError
  }
  return result
}

module.exports = { Lock, runHolding, acquireNative, LiveLocks }
