'use strict'

const { invalidType, invalidValue, outOfRange } = require('./errors')
// Longest key in bytes, as the native layer enforces it (checked here too, so
// every method throws it synchronously), and the order it takes options packed in.
const { MAX_KEY_BYTES, packedAcquireOptions } = require('../binding.js')

/**
 * Checks a lock key (a string or an array of strings) and returns it as a plain
 * array. The input is read once: a Proxy or an element getter that changes its
 * answer cannot hand the native layer something other than what was checked.
 */
function keyList(key, name = 'key') {
  let list
  if (Array.isArray(key)) {
    // A getter or Proxy trap that throws: its own error goes to the caller, as anywhere in JS.
    list = Array.from(key)
    if (list.length === 0) throw invalidValue(name, 'must not be an empty array')
  } else list = [key]
  for (const k of list) {
    if (typeof k !== 'string') throw invalidType(name, 'of type string or an array of strings', k)
    if (k.length === 0) throw invalidValue(name, 'must be a non-empty string')
    if (!k.isWellFormed()) throw invalidValue(name, 'must be well-formed Unicode (it has a lone surrogate)')
    if (k.length * 3 > MAX_KEY_BYTES && Buffer.byteLength(k) > MAX_KEY_BYTES) {
      throw outOfRange(name, `at most ${MAX_KEY_BYTES} bytes long`, `${Buffer.byteLength(k)} bytes`)
    }
  }
  return list
}

/** One key, checked as an acquisition's (a string only). */
function oneKey(key) {
  if (typeof key !== 'string') throw invalidType('key', 'of type string', key)
  keyList(key)
}

function assertFunction(value, name) {
  if (typeof value !== 'function') throw invalidType(name, 'of type function', value)
}

const TYPES = {
  number: (v) => typeof v === 'number',
  string: (v) => typeof v === 'string',
  boolean: (v) => typeof v === 'boolean',
  function: (v) => typeof v === 'function',
  'string[]': (v) => Array.isArray(v) && Array.from(v).every((s) => typeof s === 'string'),
  AbortSignal: (v) => v instanceof AbortSignal,
  object: (v) => typeof v === 'object' && v !== null && !Array.isArray(v),
}

/**
 * Copies the own, defined properties of `options` that `schema` names, checking
 * each one's type. Inherited properties are ignored; unknown names are rejected
 * (a misspelt option must not silently change a lock).
 */
function pick(options, schema, name = 'options') {
  // A null-prototype result: the native layer reads properties through the
  // prototype chain, so a polluted Object.prototype must not reach it.
  const out = Object.create(null)
  if (options === undefined || options === null) return out
  if (typeof options !== 'object' || Array.isArray(options)) throw invalidType(name, 'of type object', options)
  for (const key of Object.keys(options)) {
    const value = options[key]
    if (value === undefined) continue
    const type = Object.hasOwn(schema, key) ? schema[key] : undefined
    if (type === undefined) {
      throw invalidValue(`${name}.${key}`, `is not a known option (known: ${Object.keys(schema).join(', ')})`)
    }
    if (type === 'node[]') {
      out[key] = nodeList(value, `${name}.${key}`)
      continue
    }
    if (type !== 'any' && !TYPES[type](value)) throw invalidType(`${name}.${key}`, `of type ${type}`, value)
    // Arrays are copied: what was checked is what the native layer reads.
    out[key] = type === 'string[]' ? Array.from(value) : value
  }
  return out
}

const NODE = 'a Redis URL string or { cluster: string[] }'
/** The fields of a cluster member of `nodes`, with their types. */
const CLUSTER_NODE = { cluster: 'string[]' }

/**
 * The `nodes` option, checked and copied: each member a master's URL or
 * `{ cluster: [seed URLs] }` (a Redis Cluster as one node).
 */
function nodeList(value, name) {
  if (!Array.isArray(value)) throw invalidType(name, `an array of ${NODE}`, value)
  return Array.from(value).map((member, i) => {
    if (typeof member === 'string') return member
    const at = `${name}[${i}]`
    if (typeof member !== 'object' || member === null || Array.isArray(member)) throw invalidType(at, NODE, member)
    for (const field of Object.keys(member)) {
      if (!Object.hasOwn(CLUSTER_NODE, field) && member[field] !== undefined) {
        throw invalidValue(`${at}.${field}`, `is not a known field of a node (known: ${Object.keys(CLUSTER_NODE).join(', ')})`)
      }
    }
    const seeds = member.cluster
    if (!TYPES['string[]'](seeds)) throw invalidType(`${at}.cluster`, 'of type string[]', seeds)
    const copy = Array.from(seeds)
    if (copy.length === 0) throw invalidValue(`${at}.cluster`, 'must list at least one seed URL')
    // A null-prototype copy, as `pick` makes: only what was checked reaches the native layer.
    const out = Object.create(null)
    out.cluster = copy
    return out
  })
}

const ACQUIRE = {
  ttl: 'number',
  retryCount: 'number',
  retryDelay: 'number',
  retryJitter: 'number',
  waitTimeout: 'number',
  maxHold: 'number',
  renewInterval: 'number',
  autoRenew: 'boolean',
  minValidity: 'number',
  waitReplicas: 'number',
  waitReplicasTimeout: 'number',
}

const ACQUIRE_JS = { ...ACQUIRE, signal: 'AbortSignal', onLost: 'function' }

/** What `adopt` accepts: the lease settings (there is nothing to wait for). */
const ADOPT = {
  ttl: 'number',
  maxHold: 'number',
  renewInterval: 'number',
  autoRenew: 'boolean',
  waitReplicas: 'number',
  waitReplicasTimeout: 'number',
  onLost: 'function',
}

const CLIENT = {
  ...ACQUIRE,
  url: 'string',
  nodes: 'node[]',
  cluster: 'string[]',
  sentinel: 'object',
  keyPrefix: 'string',
  connectTimeout: 'number',
  commandTimeout: 'number',
  nodeTimeout: 'number',
  driftFactor: 'number',
  fencing: 'boolean',
  tls: 'object',
}

/** What the LockClient constructor accepts: `CLIENT` and the JS-side `fair`. */
const CLIENT_JS = { ...CLIENT, fair: 'boolean' }

/** What a lock's acquire accepts: `ACQUIRE_JS` and `fair`. */
const ACQUIRE_LOCK = { ...ACQUIRE_JS, fair: 'boolean' }

/** PEM text from a string, a Buffer, or an array of either (ioredis/Node TLS style). */
function pem(value, name) {
  if (value === undefined || value === null) return undefined
  if (typeof value === 'string') return value
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return Buffer.from(value).toString('utf8')
  if (Array.isArray(value)) return value.map((v, i) => pem(v, `${name}[${i}]`)).join('\n')
  throw invalidType(name, 'a PEM string or Buffer', value)
}

const TLS_FIELDS = ['ca', 'cert', 'key']

/**
 * The `tls` option with its certificates as PEM text. Unknown fields are
 * rejected like unknown top-level options: a setting such as
 * `rejectUnauthorized: false` must not be silently ignored.
 */
function tlsOption(tls) {
  if (tls === undefined) return undefined
  const out = Object.create(null)
  for (const field of Object.keys(tls)) {
    if (!TLS_FIELDS.includes(field) && tls[field] !== undefined) {
      throw invalidValue(`options.tls.${field}`, `is not a known option (known: ${TLS_FIELDS.join(', ')})`)
    }
  }
  for (const field of TLS_FIELDS) {
    const v = pem(tls[field], `options.tls.${field}`)
    if (v !== undefined) out[field] = v
  }
  return out
}

/** What the `sentinel` option accepts. */
const SENTINEL = {
  sentinels: 'string[]',
  name: 'string',
  sentinelUsername: 'string',
  sentinelPassword: 'string',
  username: 'string',
  password: 'string',
  db: 'number',
}

/** The `sentinel` option, its fields checked like top-level options (unknown ones rejected). */
function sentinelOption(sentinel) {
  if (sentinel === undefined) return undefined
  const out = pick(sentinel, SENTINEL, 'options.sentinel')
  if (out.sentinels === undefined) throw invalidType('options.sentinel.sentinels', 'of type string[]', undefined)
  if (out.sentinels.length === 0) throw invalidValue('options.sentinel.sentinels', 'must list at least one sentinel URL')
  if (out.name === undefined) throw invalidType('options.sentinel.name', 'of type string', undefined)
  if (out.name === '') throw invalidValue('options.sentinel.name', 'must be a non-empty string')
  return out
}

/** An acquisition's option names in the order the native acquire takes them packed. */
const PACKED = packedAcquireOptions()
/** The packed options of the acquisition being started (read by the native call at once). */
const packed = new Float64Array(PACKED.length + 1)

/**
 * `opts` (checked by `pick`) packed for the native acquire: a bit set of the
 * options given, then each value; undefined when none is given. Reading one
 * typed array costs the native side one call; an object, one lookup per name.
 */
function packOptions(opts) {
  if (opts === undefined) return undefined
  let given = 0
  for (let i = 0; i < PACKED.length; i++) {
    const v = opts[PACKED[i]]
    if (v === undefined) {
      packed[i + 1] = 0
      continue
    }
    given |= 1 << i
    packed[i + 1] = typeof v === 'boolean' ? Number(v) : v
  }
  if (given === 0) return undefined
  packed[0] = given
  return packed
}

module.exports = { keyList, oneKey, assertFunction, pick, packOptions, tlsOption, sentinelOption, SENTINEL, ACQUIRE, ACQUIRE_JS, ACQUIRE_LOCK, ADOPT, CLIENT, CLIENT_JS, CLUSTER_NODE, TLS_FIELDS }
