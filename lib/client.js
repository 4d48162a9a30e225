'use strict'

// LockClient: one native client (connections, watchdog, acquire loop) and the
// JS side of its locks: loss events routed to their Lock, withLock, close().

const { EventEmitter } = require('node:events')
const { NativeClient, CancelHandle, MAX_MS, lockEnding, lockView, forgetLock } = require('../binding.js')
const { LockError, withStack, invalidType, invalidValue, outOfRange } = require('./errors')
const { keyList, oneKey, assertFunction, pick, packOptions, tlsOption, sentinelOption, ACQUIRE_LOCK, ADOPT, CLIENT_JS } = require('./validate')
const { Lock, runHolding, acquireNative, LiveLocks } = require('./lock')
const { Semaphore } = require('./semaphore')
const { ReadWriteLock } = require('./rwlock')
const {
  hot, kReport, kForget, kEnded, kLost, kAcquireWith, kWithLock, kNative, kFair,
  channels, rethrowLater, takenAsNull, abortedError, linkSignal, settledWithin,
} = require('./internal')

const CLOSE = { graceful: 'number' }

/**
 * A Redis lock client: one shared connection per node, a native watchdog for
 * every held lock. Events: `'lost'` (err, lock); `'error'` (err) for node
 * failures, coalesced; `'reconnected'` (info) when a node answers again.
 */
class LockClient extends EventEmitter {
  #native
  #hotKey = null // the native client's name for the JS thread's own acquire; null off the JS-loop driver
  /** The locks held, so a native loss event finds its Lock. */
  #live = new LiveLocks()
  /** Running withLock calls, for close({ graceful }). */
  #running = new Set()
  /** The promise of the first close() call; set as soon as it is called. */
  #closing = null
  /** Locks are taken fairly unless an acquisition says otherwise (client option `fair`). */
  #fair = false

  /**
   * The native event callback. It holds the client only weakly: the callback
   * is rooted by the native thread-safe function, and a strong reference
   * would keep every client (and its native side) alive forever.
   */
  static #sink(ref) {
    return (kind, id, payload) => {
      const client = ref.deref()
      if (client) client.#onEvent(kind, id, payload)
    }
  }

  constructor(options) {
    super()
    const opts = pick(options, CLIENT_JS)
    if (opts.tls !== undefined) opts.tls = tlsOption(opts.tls)
    if (opts.sentinel !== undefined) opts.sentinel = sentinelOption(opts.sentinel)
    this.#fair = opts.fair === true
    delete opts.fair
    try {
      this.#native = new NativeClient(opts, LockClient.#sink(new WeakRef(this)))
      if (hot) this.#hotKey = this.#native.hotKey
    } catch (e) {
      throw withStack(e)
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

  /** A native event: 'lost' and 'error' with the LockError built natively, 'reconnected' with its info. */
  #onEvent(kind, id, err) {
    try {
      if (kind === 'lost') {
        this.#reportLoss(err, this.#live.take(id))
      } else if (kind === 'renewed') {
        if (channels.renew.hasSubscribers) channels.renew.publish({ client: this, count: id })
      } else if (kind === 'error' && this.listenerCount('error') > 0) {
        err.repeated = id
        this.emit('error', err)
      } else if (kind === 'reconnected' && this.listenerCount('reconnected') > 0) {
        this.emit('reconnected', err)
      }
    } catch (e) {
      rethrowLater(e)
    }
  }

  /** Every loss, whoever found it (a renewal, or a release): signal, onLost, 'lost'. */
  #reportLoss(err, lock) {
    if (lock) lock[kLost](err)
    if (channels.lost.hasSubscribers) channels.lost.publish({ key: err.key, error: err, lock })
    if (this.listenerCount('lost') > 0) this.emit('lost', err, lock)
  }

  /** @internal a release found the key gone or another owner's. */
  [kReport](err, lock) {
    try {
      this.#reportLoss(err, lock)
    } catch (e) {
      rethrowLater(e)
    }
  }

  /** @internal the lock was released: no loss event needs to find it. */
  [kForget](id) {
    this.#live.delete(id)
  }

  /** `host:port` of each node; one `cluster host:port,…` entry for a Redis Cluster. */
  get nodes() {
    return this.#native.nodes
  }

  /** Whether plain operations take the JS thread's own event loop, as `NativeClient.fastPath` says. */
  get fastPath() {
    return this.#native.fastPath
  }

  /** True once `close()` was called. */
  get closed() {
    return this.#native.closed
  }

  /** Counters since the client was created. */
  stats() {
    return this.#native.stats()
  }

  /** Each node's health, in the order of `nodes`: `{ node, up, since, error, faults }`. */
  health() {
    return this.#native.health()
  }

  /** Reads a lock key on every node without changing it: `{ held, remainingMs, holder (masked token), fence }`. */
  inspect(key) {
    oneKey(key)
    return this.#native.inspect(key).then(
      (i) => ({ held: i.held, remainingMs: i.remainingMs ?? null, holder: i.holder ?? null, fence: i.fence ?? null }),
      (e) => {
        throw withStack(e)
      },
    )
  }

  /**
   * UNSAFE, for operators: deletes the lock key on every node whoever holds it.
   * The holder is not told and may still be working. Resolves on how many nodes it existed.
   */
  forceRelease(key) {
    oneKey(key)
    return this.#native.forceRelease(key).catch((e) => {
      throw withStack(e)
    })
  }

  /**
   * Takes the lock on `key` (or on every key of an array, as one lock), waiting
   * while another owner holds it as `retryCount`, `retryDelay`, `retryJitter`,
   * `waitTimeout` and `signal` allow. The lock is renewed natively until released.
   */
  acquire(key, options) {
    return this.#lock(key, options, false)
  }

  /** One attempt: resolves the Lock, or null when another owner holds it. */
  tryAcquire(key, options) {
    return takenAsNull(this.#lock(key, options, true))
  }

  #lock(key, options, once) {
    const keys = keyList(key)
    // No options (the common call): the native layer reads none.
    if (options == null && !once && !this.#fair) return this.#acquire(keys, undefined, undefined, undefined, undefined)
    const opts = pick(options, ACQUIRE_LOCK)
    const { signal, onLost } = opts
    delete opts.signal
    delete opts.onLost
    if (once) opts.retryCount = 0
    return this.#acquire(keys, opts, this.#fairKind(keys, opts), signal, onLost)
  }

  /**
   * With `fair` (this acquisition's, else the client's): waiters in every
   * process are served in arrival order through a line kept in Redis.
   */
  #fairKind(keys, opts) {
    const fair = opts.fair ?? this.#fair
    delete opts.fair
    if (!fair) return undefined
    if (keys.length !== 1) throw invalidValue('options.fair', 'needs a single key')
    return { fair: true }
  }

  /**
   * Continues the lock on `key` (or every key of an array) whose value is
   * `token`, e.g. handed over by another process or kept across a restart: one
   * token-checked extend to `ttl` on every node, then the native watchdog renews
   * it like an acquired lock (signal, onLost and 'lost' as usual). Never creates
   * a key: rejects with ERR_LOCK_LOST when the keys are gone or hold another token.
   */
  adopt(key, token, options) {
    const keys = keyList(key)
    if (typeof token !== 'string') throw invalidType('token', 'of type string', token)
    const opts = pick(options, ADOPT)
    const { onLost } = opts
    delete opts.onLost
    let pending
    try {
      pending = this.#native.adopt(keys, token, opts)
    } catch (e) {
      const err = withStack(e)
      if (err instanceof LockError && err.code === 'ERR_LOCK_CLOSED') return Promise.reject(err)
      throw err
    }
    return pending.then(
      (id) => this.#hold(id, onLost, false),
      (e) => {
        throw withStack(e)
      },
    )
  }

  /**
   * Deletes the lock on `key` wherever its keys hold `token`, without adopting
   * it (a lock another process took, its token handed over). Resolves
   * `{ released, nodes }`: `released` when a quorum of nodes held the token,
   * `nodes` each node's answer (`ok` where it held it).
   */
  releaseToken(key, token) {
    const keys = keyList(key)
    if (typeof token !== 'string') throw invalidType('token', 'of type string', token)
    let pending
    try {
      pending = this.#native.releaseToken(keys, token)
    } catch (e) {
      throw withStack(e)
    }
    return pending.catch((e) => {
      throw withStack(e)
    })
  }

  /** Whether a quorum of nodes holds `key` now (any owner); one read, nothing changed. */
  isLocked(key) {
    return this.inspect(key).then((i) => i.held)
  }

  /** @internal takes another kind of lock (a semaphore's permits, a read-write lock's side): `kind` as the native acquire takes it. */
  [kAcquireWith](keys, opts, kind, signal, onLost) {
    return this.#acquire(keys, opts, kind, signal, onLost)
  }

  /** @internal withLock around any acquisition (a semaphore's withPermit). */
  [kWithLock](acquiring, fn) {
    const running = runHolding(acquiring, fn)
    this.#running.add(running)
    const done = () => this.#running.delete(running)
    running.then(done, done)
    return running
  }

  /** @internal the native client. */
  get [kNative]() {
    return this.#native
  }

  /** @internal the client's `fair` option (the default of every acquisition). */
  get [kFair]() {
    return this.#fair
  }

  /**
   * A counting semaphore on `key`: at most `limit` permits held at once across
   * every process, each holder with its own token and lease renewed by the
   * native watchdog. `options` are `limit` and the defaults of its acquisitions.
   */
  semaphore(key, options) {
    return new Semaphore(this, key, options)
  }

  /**
   * A read-write lock on `key`: any number of readers or one writer across
   * every process, writer preference. `options` are defaults for its acquisitions.
   */
  readWriteLock(key, options) {
    return new ReadWriteLock(this, key, options)
  }

  #acquire(keys, opts, kind, signal, onLost) {
    if (signal && signal.aborted) {
      return Promise.reject(abortedError(keys, signal))
    }
    let cancel = null
    let unlink = null
    if (signal) {
      cancel = new CancelHandle()
      unlink = linkSignal(signal, cancel)
    }
    let pending
    try {
      pending = acquireNative(this.#native, this.#hotKey, keys, packOptions(opts), cancel, kind)
    } catch (e) {
      if (unlink) unlink()
      const err = withStack(e)
      // Bad arguments throw synchronously; a state such as "closed" rejects.
      if (err instanceof LockError) return Promise.reject(err)
      throw err
    }
    return pending.then(
      (id) => {
        if (unlink) unlink()
        return this.#hold(id, onLost, true)
      },
      (e) => {
        if (unlink) unlink()
        const err = withStack(e)
        if (err.code === 'ERR_LOCK_ABORTED' && signal) err.cause = signal.reason
        throw err
      },
    )
  }

  /** The Lock of the native lock `id` just taken (`acquired`) or adopted, watched for loss events. */
  #hold(id, onLost, acquired) {
    // Taken just before close() ended the client's locks: nobody may work under it (read only once close() ran).
    const ending = this.#closing && lockEnding(id)
    if (ending?.code === 'ERR_LOCK_CLOSED') {
      forgetLock(id)
      return Promise.reject(withStack(ending))
    }
    const lock = new Lock(id, onLost, this)
    this.#live.add(id, lock)
    if (acquired && channels.acquire.hasSubscribers) {
      const { key, keys, token, attempts, fence } = lockView(id)
      channels.acquire.publish({ key, keys, token, attempts, fence })
    }
    this.#traceRenewals()
    return lock
  }

  /**
   * Acquires, runs `fn(signal, lock)`, and always releases. Resolves what `fn`
   * resolves. If the lock was lost meanwhile (found by a renewal, or by the
   * release finding the key gone or another owner's), rejects with
   * ERR_LOCK_LOST; if `close()` ended it, with ERR_LOCK_CLOSED. Either way the
   * error's `cause` is fn's result or error.
   */
  withLock(key, fn, options) {
    assertFunction(fn, 'fn')
    return this[kWithLock](this.acquire(key, options), fn)
  }

  /**
   * Ends the client. With `{ graceful: ms }` it first waits (at most `ms`) for
   * running `withLock` calls to finish. Then every lock still held is ended
   * before anything is released: its signal aborts and its `onLost` runs with
   * an ERR_LOCK_CLOSED error (a running `withLock` rejects with it). Then the
   * watchdogs stop, the locks are released and the connections closed. From
   * the first call on, new acquisitions reject with ERR_LOCK_CLOSED.
   */
  close(options) {
    const { graceful } = pick(options, CLOSE)
    if (graceful !== undefined && !(graceful >= 0 && graceful <= MAX_MS)) {
      throw outOfRange('options.graceful', `>= 0 and <= ${MAX_MS}`, graceful)
    }
    if (!this.#closing) {
      // New acquisitions are refused from now on, natively; held locks stay held for the graceful wait.
      this.#native.beginClose()
      this.#hotKey = null
      this.#closing = this.#close(graceful ?? 0)
    }
    return this.#closing
  }

  /** Resolves once the nodes a quorum did not wait for have answered or timed out, and background cleanups ended. */
  settled() {
    return this.#native.settled()
  }

  async #close(graceful) {
    if (graceful > 0 && this.#running.size > 0) await settledWithin([...this.#running], graceful)
    // The native close ends every lock still held and has their holders told (signal, onLost) before it sends anything.
    await this.#native.close(() => {
      for (const lock of this.#live) lock[kEnded]()
    })
  }

  async [Symbol.asyncDispose]() {
    await this.close()
  }
}

module.exports = { LockClient }
