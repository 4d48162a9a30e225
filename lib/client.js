'use strict'

const { EventEmitter } = require('node:events')
const diagnostics = require('node:diagnostics_channel')
const { NativeClient, CancelHandle, MAX_MS } = require('../binding.js')
const { LockError, fromNative, invalidType, invalidValue, outOfRange } = require('./errors')
const { keyList, assertFunction, pick, tlsOption, sentinelOption, ACQUIRE_JS, ACQUIRE_LOCK, ADOPT, CLIENT_JS } = require('./validate')

const CLOSE = { graceful: 'number' }

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
  const info = native.loss
  return info ? new LockError(info.code, info.message, info) : null
}

const kReport = Symbol('lockdog.reportLoss')
const kForget = Symbol('lockdog.forget')
const kEnd = Symbol('lockdog.end')
const kAcquireWith = Symbol('lockdog.acquireWith')
const kWithLock = Symbol('lockdog.withLock')
const kNative = Symbol('lockdog.native')
const kFair = Symbol('lockdog.fair')

/** A held lock. Created by `LockClient#acquire`; renewed natively until released. */
class Lock {
  #native
  #controller = null
  #onLost
  #loss = null
  /** The client: a lock that can still be reached keeps its client (and so its loss events) alive. */
  #client
  #delivered = false
  #releaseCalled = false
  /** The ERR_LOCK_CLOSED error when `close()` ended the lock while it was held. */
  #closedBy = null

  constructor(native, onLost, client) {
    this.#native = native
    this.#onLost = onLost
    this.#client = client
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
  /** 'held', 'released' or 'lost' (also when a release found the key gone or another owner's). */
  get status() {
    if (this.#loss) return 'lost'
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
  /**
   * Each node's answer to the lock's last acquisition, extension or release
   * (`{ node, answer, detail }`); `pending` for a node that had not answered
   * when it resolved, final once `client.settled()` resolved.
   */
  get nodes() {
    return this.#native.nodes
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
    else if (this.#native.status === 'held' && !this.#native.held) return this.#expired()
    return this.#loss
  }

  #expired() {
    return new LockError('ERR_LOCK_LOST', `lock "${this.key}" was lost: its validity ran out`, { key: this.key })
  }

  /** Aborts with a `LockError` (code ERR_LOCK_LOST, or ERR_LOCK_CLOSED) when the lock is lost or its client closed. */
  get signal() {
    if (!this.#controller) {
      this.#controller = new AbortController()
      // Whoever holds the signal keeps the lock reachable, so it is not
      // collected (and its renewal stopped) while work still listens to it.
      this.#controller.signal[kLock] = this
      const ended = this.#closedBy || (this.#native.status === 'lost' ? this.lossError : null) || this.#loss
      if (ended) this.#controller.abort(ended)
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
   * and is gone now, false if it was not: already released, or lost. A release
   * that finds the key gone or held by another owner is a loss: it is reported
   * like one found by a renewal (the signal aborts, `onLost` runs, the client
   * emits 'lost') and `withLock` rejects with ERR_LOCK_LOST.
   */
  release() {
    this.#deliverLoss()
    // Only the first release of a lock still held can discover a loss.
    const expired = this.#native.status === 'held' && !this.#native.held ? this.#expired() : null
    const discovers = !this.#releaseCalled && !this.#closedBy && this.#native.status === 'held'
    this.#releaseCalled = true
    // Released: no loss event needs to find this lock any more.
    this.#client[kForget](this.#native.id)
    const released = this.#native.release().then(
      (ok) => {
        if (!ok) {
          // Lost natively just before the release? Its event may still be queued.
          this.#deliverLoss()
          if (discovers && !this.#delivered) {
            const err = expired || new LockError('ERR_LOCK_LOST', `lock "${this.key}" was lost: on release its key was gone or held by another owner`, { key: this.key })
            this.#client[kReport](err, this)
          }
        }
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

  /** @internal the error that ended the lock before its holder released it (loss or close), or null. */
  [kEnd]() {
    return this.#closedBy || this.#loss
  }

  /** @internal called by the client when `close()` ends this lock while it is held. */
  _closed(err) {
    if (this.#delivered || this.#releaseCalled || this.#native.status !== 'held') return
    this.#closedBy = err
    this.#end(err)
  }

  /** @internal called by the client when a loss of this lock is reported. */
  _lost(err) {
    if (this.#delivered) return
    this.#loss = err
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

/** One 'abort' listener per AbortSignal, however many acquires share it. */
const signalLinks = new WeakMap()

function linkSignal(signal, cancel) {
  let link = signalLinks.get(signal)
  if (!link) {
    const handles = new Set()
    const onAbort = () => {
      signalLinks.delete(signal)
      for (const h of handles) h.cancel()
    }
    link = { handles, onAbort }
    signalLinks.set(signal, link)
    signal.addEventListener('abort', onAbort, { once: true })
  }
  link.handles.add(cancel)
  return () => {
    link.handles.delete(cancel)
    if (link.handles.size === 0 && signalLinks.get(signal) === link) {
      signalLinks.delete(signal)
      signal.removeEventListener('abort', link.onAbort)
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
  /** Running withLock calls, for close({ graceful }). */
  #running = new Set()
  /** The promise of the first close() call; set as soon as it is called. */
  #closing = null
  /** Locks are taken fairly unless an acquisition says otherwise (client option `fair`). */
  #fair = false

  #sweep() {
    for (const [id, ref] of this.#live) if (ref.deref() === undefined) this.#live.delete(id)
    this.#sweepAt = Math.max(1024, 2 * this.#live.size)
  }

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

  #onEvent(kind, id, detail) {
    try {
      if (kind === 'lost') {
        const err = new LockError(detail.code, detail.message, detail)
        const ref = this.#live.get(id)
        this.#live.delete(id)
        this.#reportLoss(err, ref && ref.deref())
      } else if (kind === 'renewed') {
        if (channels.renew.hasSubscribers) channels.renew.publish({ client: this, count: id })
      } else if (kind === 'error' && this.listenerCount('error') > 0) {
        const code = detail.answer === 'error' ? 'ERR_LOCK_REDIS' : 'ERR_LOCK_CONNECTION'
        this.emit('error', new LockError(code, `Redis at ${detail.node}: ${detail.detail}`, { nodes: [detail] }))
      }
    } catch (e) {
      rethrowLater(e)
    }
  }

  /** Every loss, whoever found it (a renewal, or a release): signal, onLost, 'lost'. */
  #reportLoss(err, lock) {
    if (lock) lock._lost(err)
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

  /** True once `close()` was called. */
  get closed() {
    return this.#closing !== null || this.#native.closed
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
    if (typeof key !== 'string') throw invalidType('key', 'of type string', key)
    keyList(key)
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
    if (typeof key !== 'string') throw invalidType('key', 'of type string', key)
    keyList(key)
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
    const opts = pick(options, ACQUIRE_LOCK)
    const { signal, onLost } = opts
    delete opts.signal
    delete opts.onLost
    return this.#acquire(keys, opts, signal, onLost, this.#fairStart(keys, opts))
  }

  /**
   * With `fair` (this acquisition's, else the client's): waiters in every
   * process are served in arrival order through a line kept in Redis.
   */
  #fairStart(keys, opts) {
    const fair = opts.fair ?? this.#fair
    delete opts.fair
    if (!fair) return undefined
    if (keys.length !== 1) throw invalidValue('options.fair', 'needs a single key')
    return (native, cancel) => native.acquireFair(keys[0], opts, cancel)
  }

  /** One attempt: resolves the Lock, or null when another owner holds it. */
  tryAcquire(key, options) {
    const keys = keyList(key)
    const opts = pick(options, ACQUIRE_LOCK)
    const { signal, onLost } = opts
    delete opts.signal
    delete opts.onLost
    opts.retryCount = 0
    return this.#acquire(keys, opts, signal, onLost, this.#fairStart(keys, opts)).catch((e) => {
      if (e && e.code === 'ERR_LOCK_TAKEN') return null
      throw e
    })
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
      if (this.#closing) throw closedError(keys)
      pending = this.#native.adopt(keys, token, opts)
    } catch (e) {
      const err = fromNative(e)
      if (err instanceof LockError && err.code === 'ERR_LOCK_CLOSED') return Promise.reject(err)
      throw err
    }
    return pending.then(
      (native) => {
        const lock = new Lock(native, onLost, this)
        if (this.#closing) {
          return lock.release().then(() => Promise.reject(closedError(keys)), () => Promise.reject(closedError(keys)))
        }
        this.#live.set(native.id, new WeakRef(lock))
        if (this.#live.size >= this.#sweepAt) this.#sweep()
        this.#traceRenewals()
        return lock
      },
      (e) => {
        throw fromNative(e)
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
      throw fromNative(e)
    }
    return pending.then(
      (nodes) => ({ released: nodes.filter((n) => n.answer === 'ok').length >= Math.floor(nodes.length / 2) + 1, nodes }),
      (e) => {
        throw fromNative(e)
      },
    )
  }

  /** Whether a quorum of nodes holds `key` now (any owner); one read, nothing changed. */
  isLocked(key) {
    return this.inspect(key).then((i) => i.held)
  }

  /** @internal takes a lock through another native acquisition (a semaphore's permits). */
  [kAcquireWith](keys, signal, onLost, start) {
    return this.#acquire(keys, null, signal, onLost, start)
  }

  /** @internal withLock around any acquisition (a semaphore's withPermit). */
  [kWithLock](acquiring, fn) {
    const running = this.#withLock(acquiring, fn)
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
    const { Semaphore } = require('./semaphore')
    return new Semaphore(this, key, options)
  }

  /**
   * A read-write lock on `key`: any number of readers or one writer across
   * every process, writer preference. `options` are defaults for its acquisitions.
   */
  readWriteLock(key, options) {
    const { ReadWriteLock } = require('./rwlock')
    return new ReadWriteLock(this, key, options)
  }

  #acquire(keys, opts, signal, onLost, start) {
    if (signal && signal.aborted) {
      return Promise.reject(aborted(keys, signal))
    }
    let cancel = null
    let unlink = null
    if (signal) {
      cancel = new CancelHandle()
      unlink = linkSignal(signal, cancel)
    }
    let pending
    try {
      if (this.#closing) throw closedError(keys)
      pending = start ? start(this.#native, cancel) : this.#native.acquire(keys, opts, cancel)
    } catch (e) {
      if (unlink) unlink()
      const err = fromNative(e)
      // Bad arguments throw synchronously; a state such as "closed" rejects.
      if (err instanceof LockError) return Promise.reject(err)
      throw err
    }
    return pending.then(
      (native) => {
        if (unlink) unlink()
        const id = native.id
        const lock = new Lock(native, onLost, this)
        if (this.#closing) {
          // close() began while this acquisition was in flight: nobody may work under it.
          return lock.release().then(() => Promise.reject(closedError(keys)), () => Promise.reject(closedError(keys)))
        }
        this.#live.set(id, new WeakRef(lock))
        if (this.#live.size >= this.#sweepAt) this.#sweep()
        if (channels.acquire.hasSubscribers) {
          channels.acquire.publish({ key: lock.key, keys: lock.keys, token: lock.token, attempts: lock.attempts, fence: lock.fence })
        }
        this.#traceRenewals()
        return lock
      },
      (e) => {
        if (unlink) unlink()
        const err = fromNative(e)
        if (err.code === 'ERR_LOCK_ABORTED' && signal) err.cause = signal.reason
        throw err
      },
    )
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
    const running = this.#withLock(this.acquire(key, options), fn)
    this.#running.add(running)
    const done = () => this.#running.delete(running)
    running.then(done, done)
    return running
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
    if (!this.#closing) this.#closing = this.#close(graceful ?? 0)
    return this.#closing
  }

  /**
   * Resolves once the nodes that operations did not wait for (with several
   * nodes an operation resolves as soon as a quorum decided it) have answered
   * or timed out, and every background cleanup ended. `close()` waits for it too.
   */
  settled() {
    return this.#native.settled()
  }

  async #close(graceful) {
    if (graceful > 0 && this.#running.size > 0) {
      let timer
      await Promise.race([
        Promise.allSettled([...this.#running]),
        new Promise((resolve) => { timer = setTimeout(resolve, graceful) }),
      ])
      clearTimeout(timer)
    }
    for (const ref of this.#live.values()) {
      const lock = ref.deref()
      if (lock && lock.status === 'held') {
        lock._closed(new LockError('ERR_LOCK_CLOSED', `lock "${lock.key}" was ended: its client was closed while it was held`, { key: lock.key }))
      }
    }
    await this.#native.close()
  }

  async [Symbol.asyncDispose]() {
    await this.close()
  }
}

function closedError(keys) {
  return new LockError('ERR_LOCK_CLOSED', 'the lock client is closed', { key: keys.join(', ') })
}

function aborted(keys, signal) {
  return new LockError('ERR_LOCK_ABORTED', `acquiring lock "${keys.join(', ')}" was aborted`, {
    key: keys.join(', '),
    cause: signal.reason,
  })
}

module.exports = { LockClient, Lock, kAcquireWith, kWithLock, kNative, kFair }
