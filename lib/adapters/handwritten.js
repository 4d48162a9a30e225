'use strict'

// Drop-ins for code written against a hand-made ioredis lock:
// `new DistributedLock(redis, key, ttl)` and `withLock(redis, key, fn, ttl)`;
// `withLock(key, fn, options)` runs on a default client.

const { LockClient } = require('../client')
const { invalidType } = require('../errors')
const { keyList, assertFunction } = require('../validate')
const { connectionOf } = require('./connection')
const { URL_ENV } = require('../../binding')

const byObject = new WeakMap()
const byUrl = new Map()
let defaultClient = null

/**
 * The default client of module-level `withLock(key, fn)`: REDIS_URL, else localhost.
 * Nobody can listen to its 'error' events, so its first node failure becomes one
 * process warning (a first try with no Redis running would otherwise wait out
 * waitTimeout in silence).
 */
function getDefaultClient() {
  if (!defaultClient || defaultClient.closed) {
    const client = new LockClient()
    client.once('error', (err) => {
      process.emitWarning(
        `${err.message}. Module-level withLock keeps trying until its waitTimeout; ` +
          `set ${URL_ENV} to the Redis to use, or start one (redis-server).`,
        { type: 'LockdogWarning', code: 'LOCKDOG_NODE_FAILED' },
      )
    })
    defaultClient = client
  }
  return defaultClient
}

/** The LockClient to use for `redis`, shared per client object or URL. */
function clientFor(redis, extra = {}) {
  if (redis instanceof LockClient) return redis
  const cached = typeof redis === 'object' && redis !== null ? byObject.get(redis) : byUrl.get(redis)
  if (cached && !cached.closed) return cached
  const client = new LockClient({ ...connectionOf(redis), ...extra })
  if (typeof redis === 'object' && redis !== null) byObject.set(redis, client)
  else byUrl.set(redis, client)
  return client
}

/** The hand-written lock's default lease, in ms (its signature's, kept whatever lockdog's default is). */
const HANDWRITTEN_TTL = 30000

/**
 * The hand-written lock's shape: `acquire()` makes one attempt and resolves a
 * boolean; the native watchdog renews while held; `release()` lets go.
 */
class DistributedLock {
  constructor(redis, key, ttl = HANDWRITTEN_TTL) {
    keyList(key)
    if (typeof ttl !== 'number') throw invalidType('ttl', 'of type number', ttl)
    this.redis = redis
    this.key = key
    this.ttl = ttl
    this.token = null
    this.lock = null
    this.client = clientFor(redis)
  }

  /** One attempt; true when taken (the watchdog then renews it every ttl/3). */
  async acquire() {
    const lock = await this.client.tryAcquire(this.key, { ttl: this.ttl })
    if (!lock) return false
    if (this.lock) await this.lock.release().catch(() => false)
    this.lock = lock
    this.token = lock.token
    return true
  }

  /** Aborts when the lock is lost (null before `acquire()`). */
  get signal() {
    return this.lock ? this.lock.signal : null
  }

  /** True while the lock is held. */
  get held() {
    return this.lock ? this.lock.held : false
  }

  /** Extends the current lease (same token). */
  async extend(ttl = this.ttl) {
    if (!this.lock) return false
    await this.lock.extend(ttl)
    return true
  }

  /** Stops the watchdog and releases; resolves whether the lock was still ours. */
  async release() {
    const lock = this.lock
    this.lock = null
    this.token = null
    return lock ? lock.release() : false
  }
}

/**
 * `withLock(key, fn, options?)` on the default client (REDIS_URL, else
 * redis://127.0.0.1:6379), or `withLock(redis, key, fn, ttl = 30000)` as the
 * hand-written helper had it: one attempt, then ERR_LOCK_TAKEN if held.
 */
function withLock(...args) {
  // withLock(key, fn, options) has fn second; withLock(redis, key, fn, ttl) a
  // key. A function second is always the first form, whatever the key is.
  const keyFirst = typeof args[1] === 'function' || ((typeof args[0] === 'string' || Array.isArray(args[0])) &&
    typeof args[1] !== 'string' && !Array.isArray(args[1]))
  if (keyFirst) {
    const [key, fn, options] = args
    keyList(key)
    assertFunction(fn, 'fn')
    return getDefaultClient().withLock(key, fn, options)
  }
  const [redis, key, fn, ttl = HANDWRITTEN_TTL] = args
  keyList(key)
  assertFunction(fn, 'fn')
  if (typeof ttl !== 'number') throw invalidType('ttl', 'of type number', ttl)
  return clientFor(redis).withLock(key, fn, { ttl, retryCount: 0 })
}

module.exports = { DistributedLock, withLock }
