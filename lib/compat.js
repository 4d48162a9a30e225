'use strict'

// Drop-ins for code written against a hand-made ioredis lock:
// `new DistributedLock(redis, key, ttl)` and `withLock(redis, key, fn, ttl)`.

const { LockClient } = require('./client')
const { invalidType, invalidValue } = require('./errors')
const { keyList, assertFunction } = require('./validate')

const byObject = new WeakMap()
const byUrl = new Map()
let defaultClient = null

/** The default client of module-level `withLock(key, fn)`: REDIS_URL, else localhost. */
function getDefaultClient() {
  if (!defaultClient || defaultClient.closed) defaultClient = new LockClient()
  return defaultClient
}

function credentials(user, pass) {
  if (!user && !pass) return ''
  return `${user ? encodeURIComponent(user) : ''}${pass ? `:${encodeURIComponent(pass)}` : ''}@`
}

function urlFrom({ host, port, username, password, db, tls, path }) {
  if (path) return `unix://${path}${db ? `?db=${db}` : ''}`
  const h = host || '127.0.0.1'
  const hostPart = h.includes(':') && !h.startsWith('[') ? `[${h}]` : h
  return `${tls ? 'rediss' : 'redis'}://${credentials(username, password)}${hostPart}:${port || 6379}/${db || 0}`
}

/** The certificate fields of a TLS options object (the rest is Node-specific). */
function certificates(tls) {
  if (typeof tls !== 'object' || tls === null) return {}
  const out = {}
  for (const field of ['ca', 'cert', 'key']) if (tls[field] != null) out[field] = tls[field]
  return out
}

/**
 * Connection settings of an ioredis client, a node-redis client, a URL or an
 * options object, as `{ url, keyPrefix }`. No dependency on those packages:
 * their public `options` are read.
 */
function connectionOf(redis, name = 'redis') {
  if (typeof redis === 'string') return { url: redis }
  if (!redis || typeof redis !== 'object') {
    throw invalidType(name, 'an ioredis or node-redis client, a LockClient, a URL or an options object', redis)
  }
  const o = redis.options
  if (o && typeof o === 'object' && ('host' in o || 'port' in o || 'path' in o) && !('socket' in o)) {
    // ioredis: new Redis({ host, port, username, password, db, tls, keyPrefix })
    return {
      url: urlFrom({ ...o, tls: Boolean(o.tls) }),
      keyPrefix: o.keyPrefix || '',
      ...(o.tls ? { tls: certificates(o.tls) } : {}),
    }
  }
  if (o && typeof o === 'object' && ('url' in o || 'socket' in o || 'database' in o)) {
    // node-redis: createClient({ url, socket: { host, port, tls }, username, password, database })
    const s = o.socket || {}
    if (o.url && !s.host && !s.path && !o.password && !o.username) return { url: o.url }
    const base = o.url ? new URL(o.url) : null
    return {
      ...(s.tls ? { tls: certificates(s) } : {}),
      url: urlFrom({
        host: s.host || (base && base.hostname.replace(/^\[|\]$/g, '')),
        port: s.port || (base && Number(base.port)),
        path: s.path,
        username: o.username || (base && decodeURIComponent(base.username)),
        password: o.password || (base && decodeURIComponent(base.password)),
        db: o.database || (base && Number(base.pathname.slice(1))) || 0,
        tls: Boolean(s.tls) || (base && base.protocol === 'rediss:'),
      }),
    }
  }
  if (redis.constructor === Object && ('host' in redis || 'port' in redis || 'path' in redis || 'url' in redis)) {
    const tls = redis.tls ? { tls: certificates(redis.tls) } : {}
    if (typeof redis.url === 'string') return { url: redis.url, ...tls }
    return { url: urlFrom({ ...redis, tls: Boolean(redis.tls) }), keyPrefix: redis.keyPrefix || '', ...tls }
  }
  throw invalidValue(name, 'is not an ioredis or node-redis client, a LockClient, a URL or an options object')
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

/**
 * The hand-written lock's shape: `acquire()` makes one attempt and resolves a
 * boolean; the native watchdog renews while held; `release()` lets go.
 */
class DistributedLock {
  constructor(redis, key, ttl = 30000) {
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
  // withLock(key, fn, options) has fn second; withLock(redis, key, fn, ttl) a key.
  const keyFirst = (typeof args[0] === 'string' || Array.isArray(args[0])) &&
    typeof args[1] !== 'string' && !Array.isArray(args[1])
  if (keyFirst) {
    const [key, fn, options] = args
    keyList(key)
    assertFunction(fn, 'fn')
    return getDefaultClient().withLock(key, fn, options)
  }
  const [redis, key, fn, ttl = 30000] = args
  keyList(key)
  assertFunction(fn, 'fn')
  if (typeof ttl !== 'number') throw invalidType('ttl', 'of type number', ttl)
  return clientFor(redis).withLock(key, fn, { ttl, retryCount: 0 })
}

module.exports = { DistributedLock, withLock, connectionOf }
