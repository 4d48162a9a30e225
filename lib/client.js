'use strict'

const { EventEmitter } = require('node:events')
const diagnostics = require('node:diagnostics_channel')
const { NativeClient, CancelHandle } = require('../binding.js')
const { LockError, fromNative, invalidType } = require('./errors')
const { keyList, assertFunction, pick, tlsOption, ACQUIRE, ACQUIRE_JS, CLIENT } = require('./validate')

const kLock = Symbol('lockdog.lock')

/** `diagnostics_channel` publications, for tracing tools. */
const channels = {
  acquire: diagnostics.channel('lockdog:acquire'),
  release: diagnostics.channel('lockdog:release'),
  renew: diagnostics.channel('lockdog:renew'),
  lost: diagnostics.channel('lockdog:lost'),
}

function rethrowLater(err) {
  process.nextTick(() => {
    throw err
  })
}

function nativeLoss(native) {
  const json = native.loss
  return json ? fromNative(new Error(`lockdog:${json}`)) : null
}

/** A held lock. Created by `LockClient#acquire`; renewed natively until released. */
class Lock {
  #native
  #controller = null
  #onLost
  #loss = null

  #live
  #delivered = false

  constructor(native, onLost, live) {
    this.#native = native
    this.#onLost = onLost
    this.#live = live
  }

  /** The lock's first key (without the client's keyPrefix). */
  get key() {
    return this.#native.key
  }
  /** Every key this lock holds. */
  get keys() {
    return this.#native.keys
  }
  /** The random value stored under the key. */
  get token() {
    return this.#native.token
  }
  /** Milliseconds of validity left, by the local monotonic clock (synchronous). */
  get remaining() {
    return this.#native.remaining
  }
  /** True while held and within validity. */
  get held() {
    return this.#native.held
  }
  /** 'held', 'released' or 'lost'. */
  get status() {
    const s = this.#native.status
    return s === 'held' && !this.#native.held ? 'lost' : s
  }
  /** The lease length renewals restore, in ms. */
  get ttl() {
    return this.#native.ttl
  }
  /** Attempts the acquisition took. */
  get attempts() {
    return this.#native.attempts
  }
  /** The fencing token (client option `fencing`), or null. */
  get fence() {
    return this.#native.fence
  }
  /** Replicas that acknowledged the last acquisition or extension (option `waitReplicas`), or null. */
  get replicas() {
    return this.#native.replicas ?? null
  }
  /** The `LockError` (ERR_LOCK_LOST) the lock was lost with, or null. */
  get lossError() {
    if (this.#loss) return this.#loss
    if (this.#native.status === 'lost') this.#loss = nativeLoss(this.#native)
    else if (this.#native.status === 'held' && !this.#native.held) {
      return new LockError('ERR_LOCK_LOST', `lock "${this.key}" was lost: its validity ran out`, { key: this.key })
    }
    return this.#loss
  }

  /** Aborts with a `LockError` (code ERR_LOCK_LOST) when the lock is lost. */
  get signal() {
    if (!this.#controller) {
      this.#controller = new AbortController()
      // Whoever holds the signal keeps the lock reachable, so it is not
      // collected (and its renewal stopped) while work still listens to it.
      this.#controller.signal[kLock] = this
      const loss = this.#native.status === 'lost' ? this.lossError : null
      if (loss) this.#controller.abort(loss)
    }
    return this.#controller.signal
  }

  /** Extends the lease to `ttl` ms from now (same token). */
  extend(ttl = this.ttl) {
    if (typeof ttl !== 'number') throw invalidType('ttl', 'of type number', ttl)
    let p
    try {
      p = this.#native.extend(ttl)
    } catch (e) {
      const err = fromNative(e)
      if (err instanceof LockError) return Promise.reject(err)
      throw err
    }
    return p.catch((e) => {
      throw fromNative(e)
    })
  }

  /**
   * Releases the lock (the watchdog stops first). Resolves true if it was ours
   * and is gone now, false if it was already released, lost or taken over.
   */
  release() {
    this.#deliverLoss()
    // Released: no loss event needs to find this lock any more.
    this.#live.delete(this.#native.id)
    const released = this.#native.release().then(
      (ok) => {
        // Lost natively just before the release? Its event may still be queued.
        if (!ok) this.#deliverLoss()
        return ok
      },
      (e) => {
        throw fromNative(e)
      },
    )
    if (!channels.release.hasSubscribers) return released
    return released.then((ok) => {
      channels.release.publish({ key: this.key, keys: this.keys, token: this.token, released: ok })
      return ok
    })
  }

  /** Tells the signal and onLost of a loss the native side knows of, once. */
  #deliverLoss() {
    if (!this.#delivered && this.#native.status === 'lost') this._lost(this.lossError)
  }

  async [Symbol.asyncDispose]() {
    await this.release()
  }

  /** @internal called by the client when the native watchdog reports a loss. */
  _lost(err) {
    if (this.#delivered) return
    this.#delivered = true
    this.#loss = err
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
 * A Redis lock client: one shared connection per node, a native watchdog for
 * every held lock. Events: `'lost'` (err, lock), `'error'` (err) for node failures
 * (only when someone listens).
 */
class LockClient extends EventEmitter {
  #native
  /** Lock id → WeakRef(Lock), so a native loss event finds its lock. */
  #live = new Map()
  /** Size at which #live is next swept of collected locks (cheaper per lock than a FinalizationRegistry). */
  #sweepAt = 1024

  #sweep() {
    for (const [id, ref] of this.#live) if (ref.deref() === undefined) this.#live.delete(id)
    this.#sweepAt = Math.max(1024, 2 * this.#live.size)
  }

  constructor(options) {
    super()
    const opts = pick(options, CLIENT)
    if (opts.tls !== undefined) opts.tls = tlsOption(opts.tls)
    try {
      this.#native = new NativeClient(opts, (kind, id, payload) => this.#onEvent(kind, id, payload))
    } catch (e) {
      throw fromNative(e)
    }
  }

  #renewTraced = false

  #traceRenewals() {
    const on = channels.renew.hasSubscribers
    if (on !== this.#renewTraced) {
      this.#renewTraced = on
      this.#native.renewEvents = on
    }
  }

  #onEvent(kind, id, payload) {
    try {
      if (kind === 'lost') {
        const err = fromNative(new Error(`lockdog:${payload}`))
        const ref = this.#live.get(id)
        this.#live.delete(id)
        const lock = ref && ref.deref()
        if (lock) lock._lost(err)
        if (channels.lost.hasSubscribers) channels.lost.publish({ key: err.key, error: err, lock })
        if (this.listenerCount('lost') > 0) this.emit('lost', err, lock)
      } else if (kind === 'renewed') {
        if (channels.renew.hasSubscribers) channels.renew.publish({ client: this, count: id })
      } else if (kind === 'error' && this.listenerCount('error') > 0) {
        const p = JSON.parse(payload)
        const code = p.answer === 'error' ? 'ERR_LOCK_REDIS' : 'ERR_LOCK_CONNECTION'
        this.emit('error', new LockError(code, `Redis at ${p.node}: ${p.detail}`, { nodes: [p] }))
      }
    } catch (e) {
      rethrowLater(e)
    }
  }

  /** `host:port` of each node; one `cluster host:port,…` entry for a Redis Cluster. */
  get nodes() {
    return this.#native.nodes
  }

  /** True once `close()` was called. */
  get closed() {
    return this.#native.closed
  }

  /** Counters since the client was created. */
  stats() {
    return this.#native.stats()
  }

  /**
   * Reads a lock key on every node without changing it: `{ held, remainingMs,
   * holder (masked token), fence }`.
   */
  inspect(key) {
    keyList(key)
    if (typeof key !== 'string') throw invalidType('key', 'of type string', key)
    return this.#native.inspect(key).then(
      (i) => ({ held: i.held, remainingMs: i.remainingMs ?? null, holder: i.holder ?? null, fence: i.fence ?? null }),
      (e) => {
        throw fromNative(e)
      },
    )
  }

  /**
   * UNSAFE, for operators: deletes the lock key on every node whoever holds it.
   * The holder is not told and may still be working. Resolves on how many nodes it existed.
   */
  forceRelease(key) {
    keyList(key)
    if (typeof key !== 'string') throw invalidType('key', 'of type string', key)
    return this.#native.forceRelease(key).catch((e) => {
      throw fromNative(e)
    })
  }

  /**
   * Takes the lock on `key` (or on every key of an array, as one lock), waiting
   * while another owner holds it as `retryCount`, `retryDelay`, `retryJitter`,
   * `waitTimeout` and `signal` allow. The lock is renewed natively until released.
   */
  acquire(key, options) {
    const keys = keyList(key)
    const opts = pick(options, ACQUIRE_JS)
    const { signal, onLost } = opts
    delete opts.signal
    delete opts.onLost
    return this.#acquire(keys, opts, signal, onLost)
  }

  /** One attempt: resolves the Lock, or null when another owner holds it. */
  tryAcquire(key, options) {
    const keys = keyList(key)
    const opts = pick(options, ACQUIRE_JS)
    const { signal, onLost } = opts
    delete opts.signal
    delete opts.onLost
    opts.retryCount = 0
    return this.#acquire(keys, opts, signal, onLost).catch((e) => {
      if (e && e.code === 'ERR_LOCK_TAKEN') return null
      throw e
    })
  }

  #acquire(keys, opts, signal, onLost) {
    if (signal && signal.aborted) {
      return Promise.reject(aborted(keys, signal))
    }
    let cancel = null
    let onAbort = null
    if (signal) {
      cancel = new CancelHandle()
      onAbort = () => cancel.cancel()
      signal.addEventListener('abort', onAbort, { once: true })
    }
    let pending
    try {
      pending = this.#native.acquire(keys, opts, cancel)
    } catch (e) {
      if (signal) signal.removeEventListener('abort', onAbort)
      const err = fromNative(e)
      // Bad arguments throw synchronously; a state such as "closed" rejects.
      if (err instanceof LockError) return Promise.reject(err)
      throw err
    }
    return pending.then(
      (native) => {
        if (signal) signal.removeEventListener('abort', onAbort)
        const id = native.id
        const lock = new Lock(native, onLost, this.#live)
        this.#live.set(id, new WeakRef(lock))
        if (this.#live.size >= this.#sweepAt) this.#sweep()
        if (channels.acquire.hasSubscribers) {
          channels.acquire.publish({ key: lock.key, keys: lock.keys, token: lock.token, attempts: lock.attempts, fence: lock.fence })
        }
        this.#traceRenewals()
        return lock
      },
      (e) => {
        if (signal) signal.removeEventListener('abort', onAbort)
        const err = fromNative(e)
        if (err.code === 'ERR_LOCK_ABORTED' && signal) err.cause = signal.reason
        throw err
      },
    )
  }

  /**
   * Acquires, runs `fn(signal, lock)`, and always releases. Resolves what `fn`
   * resolves; if the lock was lost meanwhile, rejects with ERR_LOCK_LOST whose
   * `cause` is fn's result or error.
   */
  withLock(key, fn, options) {
    assertFunction(fn, 'fn')
    return this.#withLock(this.acquire(key, options), fn)
  }

  async #withLock(acquiring, fn) {
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
    const loss = lock.status === 'lost' ? lock.lossError : null
    let releaseError = null
    try {
      await lock.release()
    } catch (e) {
      releaseError = e
    }
    if (loss) {
      throw new LockError('ERR_LOCK_LOST', loss.message, { ...loss, cause: failed ? error : result })
    }
    if (failed) throw error
    if (releaseError) {
      releaseError.result = result
      throw releaseError
    }
    return result
  }

  /** Stops every watchdog, releases every held lock and closes connections. */
  async close() {
    await this.#native.close()
  }

  async [Symbol.asyncDispose]() {
    await this.close()
  }
}

function aborted(keys, signal) {
  return new LockError('ERR_LOCK_ABORTED', `acquiring lock "${keys.join(', ')}" was aborted`, {
    key: keys.join(', '),
    cause: signal.reason,
  })
}

module.exports = { LockClient, Lock, ACQUIRE }
