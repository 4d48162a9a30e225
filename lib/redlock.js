'use strict'

// A drop-in for the `redlock` package (v5 API) on lockdog's native quorum lock:
// `new Redlock(clients, settings)`, `acquire`, `release`, `extend`, `using`,
// `on('error')`, `ExecutionError`, `ResourceLockedError`. Keys are stored as
// redlock stores them: the resource name holds the lock's value.

const { EventEmitter } = require('node:events')
const { LockClient } = require('./client')
const { LockError, invalidType, invalidValue } = require('./errors')
const { keyList, assertFunction } = require('./validate')
const { connectionOf } = require('./compat')

const MAX_MS = 2 ** 31 - 1

const DEFAULT_SETTINGS = Object.freeze({
  driftFactor: 0.01,
  retryCount: 10,
  retryDelay: 200,
  retryJitter: 100,
  automaticExtensionThreshold: 500,
})

/** A resource is held by another owner on a node. */
class ResourceLockedError extends Error {
  constructor(message) {
    super(message)
    this.name = 'ResourceLockedError'
  }
}

/**
 * An operation could not reach a quorum; `attempts` are its per-attempt stats
 * (as redlock has them), `code` and `nodes` lockdog's detail.
 */
class ExecutionError extends Error {
  constructor(message, attempts = [], detail = {}) {
    super(message, 'cause' in detail ? { cause: detail.cause } : undefined)
    this.name = 'ExecutionError'
    this.code = detail.code || 'ERR_LOCK_QUORUM'
    if (detail.key != null) this.key = detail.key
    this.nodes = detail.nodes || []
    this.attempts = attempts
  }
}

function checkSettings(settings, name = 'settings') {
  if (settings === undefined || settings === null) return {}
  if (typeof settings !== 'object' || Array.isArray(settings)) throw invalidType(name, 'of type object', settings)
  const out = {}
  for (const key of Object.keys(DEFAULT_SETTINGS)) {
    if (!Object.hasOwn(settings, key) || settings[key] === undefined) continue
    if (typeof settings[key] !== 'number') throw invalidType(`${name}.${key}`, 'of type number', settings[key])
    out[key] = settings[key]
  }
  return out
}

function duration(value, name = 'duration') {
  if (typeof value !== 'number') throw invalidType(name, 'of type number', value)
  return value
}

/** A lock as redlock returns it. `expiration` is a wall-clock ms timestamp. */
class Lock {
  constructor(redlock, inner, resources, attempts, settings) {
    this.redlock = redlock
    this.resources = resources
    this.value = inner.token
    this.attempts = attempts
    this.expiration = inner.remaining > 0 ? Date.now() + Math.floor(inner.remaining) : 0
    this.settings = settings
    Object.defineProperty(this, 'inner', { value: inner, enumerable: false })
  }

  /** Releases on every node. Never throws because the lock already expired. */
  release() {
    return this.redlock.release(this)
  }

  /** Extends by `duration` ms; resolves a new Lock (this one's expiration becomes 0). */
  extend(duration) {
    return this.redlock.extend(this, duration)
  }
}

class Redlock extends EventEmitter {
  /**
   * @param clients ioredis or node-redis clients, URLs or `{ host, port, ... }`,
   *   one per independent Redis master.
   */
  constructor(clients, settings = {}, scripts = undefined) {
    super()
    if (!clients || typeof clients[Symbol.iterator] !== 'function' || typeof clients === 'string') {
      throw invalidType('clients', 'an array of Redis clients', clients)
    }
    this.clients = [...clients]
    if (this.clients.length === 0) throw invalidValue('clients', 'must contain at least one Redis client')
    void scripts // custom scripts are not supported: lockdog's are token-checked and fixed
    this.settings = { ...DEFAULT_SETTINGS, ...checkSettings(settings) }
    const conns = this.clients.map((c, i) => connectionOf(c, `clients[${i}]`))
    this.client = new LockClient({
      nodes: conns.map((c) => c.url),
      keyPrefix: conns[0].keyPrefix || '',
      driftFactor: this.settings.driftFactor,
      ...(conns.find((c) => c.tls) ? { tls: conns.find((c) => c.tls).tls } : {}),
    })
    this.client.on('error', (err) => {
      if (this.listenerCount('error') > 0) this.emit('error', err)
    })
  }

  #resolve(settings) {
    return { ...this.settings, ...checkSettings(settings) }
  }

  #options(s, ttl, autoRenew) {
    const unlimited = s.retryCount === -1 || s.retryCount === Infinity
    return {
      ttl,
      autoRenew,
      retryCount: unlimited ? Infinity : s.retryCount,
      retryDelay: s.retryDelay,
      retryJitter: s.retryJitter,
      waitTimeout: MAX_MS,
    }
  }

  #stats(nodes) {
    const votesFor = new Set()
    const votesAgainst = new Map()
    nodes.forEach((n, i) => {
      const client = this.clients[i]
      if (n.answer === 'ok') votesFor.add(client)
      else if (n.answer === 'held') votesAgainst.set(client, new ResourceLockedError(`${n.node}: ${n.detail}`))
      else votesAgainst.set(client, new Error(`${n.node}: ${n.detail}`))
    })
    const membershipSize = this.clients.length
    return { membershipSize, quorumSize: Math.floor(membershipSize / 2) + 1, votesFor, votesAgainst }
  }

  #attempts(count, nodes) {
    // Per-node answers are known for the last attempt; earlier ones only by count.
    const list = []
    for (let i = 1; i < count; i++) list.push(Promise.resolve(this.#stats([])))
    if (count > 0) list.push(Promise.resolve(this.#stats(nodes)))
    return list
  }

  #executionError(err) {
    if (!(err instanceof LockError)) return err
    const message = err.code === 'ERR_LOCK_TAKEN' || err.code === 'ERR_LOCK_TIMEOUT'
      ? `The operation was unable to achieve a quorum during its retry window: ${err.message}`
      : err.message
    return new ExecutionError(message, this.#attempts(err.attempts || 1, err.nodes || []), { ...err, cause: err })
  }

  /** Acquires `resources` (all of them, one lock) for `duration` ms. Not renewed: use `extend` or `using`. */
  acquire(resources, duration_, settings) {
    const keys = keyList(resources, 'resources')
    const ttl = duration(duration_)
    const s = this.#resolve(settings)
    return this.#acquire(keys, ttl, s, false)
  }

  async #acquire(keys, ttl, s, autoRenew, extra = {}) {
    let inner
    try {
      inner = await this.client.acquire(keys, { ...this.#options(s, ttl, autoRenew), ...extra })
    } catch (e) {
      throw this.#executionError(e)
    }
    return new Lock(this, inner, keys, this.#attempts(inner.attempts, this.client.nodes.map((node) => ({ node, answer: 'ok', detail: 'ok' }))), s)
  }

  /** Releases `lock` on every node; resolves `{ attempts }`. An expired lock is not an error. */
  async release(lock, settings) {
    if (!(lock instanceof Lock)) throw invalidType('lock', 'a Lock', lock)
    void settings
    lock.expiration = 0
    try {
      await lock.inner.release()
    } catch (e) {
      throw this.#executionError(e)
    }
    return { attempts: this.#attempts(1, this.client.nodes.map((node) => ({ node, answer: 'ok', detail: 'ok' }))) }
  }

  /** Extends `lock` by `duration` ms (same value, same settings); resolves a new Lock. */
  async extend(lock, duration_, settings) {
    if (!(lock instanceof Lock)) throw invalidType('lock', 'a Lock', lock)
    const ttl = duration(duration_)
    const s = { ...lock.settings, ...checkSettings(settings) }
    if (lock.expiration < Date.now() || !lock.inner.held) {
      throw new ExecutionError('Cannot extend an already-expired lock.', [], { code: 'ERR_LOCK_LOST', key: lock.resources.join(', ') })
    }
    try {
      await lock.inner.extend(ttl)
    } catch (e) {
      throw this.#executionError(e)
    }
    lock.expiration = 0
    return new Lock(this, lock.inner, lock.resources, this.#attempts(1, this.client.nodes.map((node) => ({ node, answer: 'ok', detail: 'ok' }))), s)
  }

  /**
   * Runs `routine(signal)` while holding `resources`, renewed by the native
   * watchdog; `signal.aborted` (with `signal.error`) tells the routine the lock
   * was lost. Releases when the routine settles and resolves its result.
   */
  async using(resources, duration_, settingsOrRoutine, maybeRoutine) {
    const routine = typeof settingsOrRoutine === 'function' ? settingsOrRoutine : maybeRoutine
    const settings = typeof settingsOrRoutine === 'function' ? undefined : settingsOrRoutine
    const keys = keyList(resources, 'resources')
    const ttl = duration(duration_)
    assertFunction(routine, 'routine')
    const s = this.#resolve(settings)
    const lock = await this.#acquire(keys, ttl, s, true)
    const signal = lock.inner.signal
    signal.addEventListener('abort', () => { signal.error = signal.reason }, { once: true })
    try {
      return await routine(signal)
    } finally {
      await lock.inner.release().catch(() => false)
    }
  }

  /** Closes lockdog's connections and quits the given clients. */
  async quit() {
    await this.client.close()
    await Promise.all(this.clients.map((c) => (c && typeof c.quit === 'function' ? c.quit().catch(() => {}) : undefined)))
  }
}

Redlock.default = Redlock
Redlock.Redlock = Redlock
Redlock.Lock = Lock
Redlock.ExecutionError = ExecutionError
Redlock.ResourceLockedError = ResourceLockedError

module.exports = Redlock
