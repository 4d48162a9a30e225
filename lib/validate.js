'use strict'

const { invalidType, invalidValue } = require('./errors')

/** Checks a lock key (a string or an array of strings) and returns it as an array. */
function keyList(key, name = 'key') {
  const list = Array.isArray(key) ? key : [key]
  if (Array.isArray(key) && key.length === 0) throw invalidValue(name, 'must not be an empty array')
  for (const k of list) {
    if (typeof k !== 'string') throw invalidType(name, 'of type string or an array of strings', k)
    if (k.length === 0) throw invalidValue(name, 'must be a non-empty string')
    if (!k.isWellFormed()) throw invalidValue(name, 'must be well-formed Unicode (it has a lone surrogate)')
  }
  return list
}

function assertFunction(value, name) {
  if (typeof value !== 'function') throw invalidType(name, 'of type function', value)
}

const TYPES = {
  number: (v) => typeof v === 'number',
  string: (v) => typeof v === 'string',
  boolean: (v) => typeof v === 'boolean',
  function: (v) => typeof v === 'function',
  'string[]': (v) => Array.isArray(v) && v.every((s) => typeof s === 'string'),
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
    if (type !== 'any' && !TYPES[type](value)) throw invalidType(`${name}.${key}`, `of type ${type}`, value)
    out[key] = value
  }
  return out
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

const CLIENT = {
  ...ACQUIRE,
  url: 'string',
  nodes: 'string[]',
  cluster: 'string[]',
  keyPrefix: 'string',
  connectTimeout: 'number',
  commandTimeout: 'number',
  nodeTimeout: 'number',
  driftFactor: 'number',
  fencing: 'boolean',
  tls: 'object',
}

/** PEM text from a string, a Buffer, or an array of either (ioredis/Node TLS style). */
function pem(value, name) {
  if (value === undefined || value === null) return undefined
  if (typeof value === 'string') return value
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return Buffer.from(value).toString('utf8')
  if (Array.isArray(value)) return value.map((v, i) => pem(v, `${name}[${i}]`)).join('\n')
  throw invalidType(name, 'a PEM string or Buffer', value)
}

/** The `tls` option with its certificates as PEM text; other TLS settings are ignored. */
function tlsOption(tls) {
  if (tls === undefined) return undefined
  const out = Object.create(null)
  for (const field of ['ca', 'cert', 'key']) {
    const v = pem(tls[field], `options.tls.${field}`)
    if (v !== undefined) out[field] = v
  }
  return out
}

module.exports = { keyList, assertFunction, pick, tlsOption, ACQUIRE, ACQUIRE_JS, CLIENT }
