'use strict'

// Where a Redis client given to a drop-in connects: its URL, key prefix and
// TLS certificates, read from the public `options` of an ioredis or
// node-redis client (no dependency on either package), a URL or an options object.

const { invalidType, invalidValue } = require('../errors')

/** An error with lockdog's stable `code` (the drop-ins keep their packages' classes and messages). */
function coded(error, code) {
  error.code = code
  return error
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
 * Why lockdog cannot open its own connection to the server `redis` talks to
 * (an ioredis-shaped client whose `options` do not say where it connects), or
 * null. ioredis-mock keeps its data in memory (its `host` is a placeholder);
 * a custom `Connector` or Sentinel picks the server at connect time.
 */
function unaddressable(redis) {
  if (!redis || typeof redis !== 'object' || redis.constructor === Object) return null
  const o = redis.options
  if (!o || typeof o !== 'object' || 'socket' in o || 'url' in o || 'database' in o) return null
  if (!('host' in o || 'port' in o || 'path' in o)) return null
  if (o.Connector) return 'it connects through a custom Connector'
  if (Array.isArray(o.sentinels) && o.sentinels.length > 0) return 'it finds its master through Sentinel'
  if (!redis.connector || typeof redis.connector.connect !== 'function') {
    return 'it is not connected to a Redis server (e.g. ioredis-mock)'
  }
  return null
}

/**
 * Connection settings of an ioredis client, a node-redis client, a URL or an
 * options object, as `{ url, keyPrefix }`. No dependency on those packages:
 * their public `options` are read. A client whose server cannot be told from
 * them (see `unaddressable`) is refused: lockdog never locks on a server other
 * than the one the client talks to.
 */
function connectionOf(redis, name = 'redis') {
  if (typeof redis === 'string') return { url: redis }
  if (!redis || typeof redis !== 'object') {
    throw invalidType(name, 'an ioredis or node-redis client, a LockClient, a URL or an options object', redis)
  }
  const why = unaddressable(redis)
  if (why) {
    throw coded(invalidValue(name, `cannot be used: lockdog opens its own connection to the client's server, and ${why}; pass a URL or options of a real server`), 'ERR_LOCK_UNREACHABLE_CLIENT')
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

module.exports = { connectionOf, unaddressable, coded }
