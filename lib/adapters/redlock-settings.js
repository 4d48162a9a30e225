'use strict'

// The redlock drop-in's settings and arguments, checked as redlock 5 words its
// errors; its retry executor; and the LockClient its members become.

const { LockClient } = require('../client')
const { driftMs } = require('../../binding.js')
const { invalidType, invalidValue } = require('../errors')
const { connectionOf, coded } = require('./connection')
const { Lock, ExecutionError } = require('./redlock-lock')

/** redlock 5's own defaults (not lockdog's: a drop-in keeps the package's behaviour). */
const DEFAULT_SETTINGS = Object.freeze({
  driftFactor: 0.01,
  retryCount: 10,
  retryDelay: 200,
  retryJitter: 100,
  automaticExtensionThreshold: 500,
})

const DURATION_MESSAGE = 'Duration must be an integer value in milliseconds.'
const QUORUM_MESSAGE = 'The operation was unable to achieve a quorum during its retry window.'
// What ioredis says for a node it cannot reach; lockdog's own detail is the `cause`.
const UNREACHABLE_MESSAGE = 'Connection is closed.'

/**
 * When a lock's validity ends (wall clock): the core's validity, counted from
 * the attempt that succeeded. Without resources, as redlock counts it.
 */
function expiration(inner, start, duration, settings, clientDrift) {
  const drift = (factor) => driftMs(duration, factor)
  if (!inner) return start + duration - drift(settings.driftFactor)
  // The core's validity allows for the constructor's driftFactor; a call's own replaces it.
  return Date.now() + Math.floor(inner.remaining) + drift(clientDrift) - drift(settings.driftFactor)
}

function checkDuration(duration) {
  if (typeof duration !== 'number') throw coded(new Error(DURATION_MESSAGE), 'ERR_INVALID_ARG_TYPE')
  if (Math.floor(duration) !== duration) throw coded(new Error(DURATION_MESSAGE), 'ERR_INVALID_ARG_VALUE')
}

const isInt = (v) => Number.isSafeInteger(v)
/** What each setting must be; a wrong one is refused rather than replaced by a default. */
const SETTING_RULES = {
  driftFactor: [(v) => Number.isFinite(v) && v >= 0 && v < 1, 'a number >= 0 and < 1'],
  retryCount: [(v) => (isInt(v) && v >= -1) || v === Infinity, 'an integer >= -1 (-1: no limit)'],
  retryDelay: [(v) => isInt(v) && v >= 0, 'an integer >= 0'],
  retryJitter: [(v) => isInt(v) && v >= 0, 'an integer >= 0'],
  automaticExtensionThreshold: [(v) => isInt(v) && v >= 0, 'an integer >= 0'],
}

/** Checks settings as given to the constructor or to one call; undefined ones are left out. */
function checkSettings(settings, name) {
  if (settings === undefined || settings === null) return {}
  if (typeof settings !== 'object' || Array.isArray(settings)) throw invalidType(name, 'of type object', settings)
  const out = {}
  for (const [key, [ok, what]] of Object.entries(SETTING_RULES)) {
    const v = settings[key]
    if (v === undefined) continue
    if (typeof v !== 'number') throw invalidType(`${name}.${key}`, 'of type number', v)
    if (!ok(v)) throw invalidValue(`${name}.${key}`, `must be ${what}. Received ${v}`)
    out[key] = v
  }
  return out
}

/** The Lock `lock` if this module made it, else a typed error. */
function checkLock(lock) {
  if (!(lock instanceof Lock) || !Array.isArray(lock.resources)) {
    throw invalidType('lock', 'a Lock returned by acquire or extend', lock)
  }
  if (typeof lock.value !== 'string') throw invalidType('lock.value', 'of type string', lock.value)
}

/** An ioredis `Cluster`: its seed nodes as URLs, and the key prefix it applies. */
function clusterOf(client) {
  if (!client || typeof client !== 'object' || client.isCluster !== true) return null
  const o = client.options || {}
  const auth = o.redisOptions || {}
  const tls = auth.tls ? { tls: auth.tls } : {}
  const seeds = (client.startupNodes || []).map((n) => {
    if (typeof n === 'string') return n.includes('://') ? n : `redis://${n}`
    if (typeof n === 'number') return `redis://127.0.0.1:${n}`
    return connectionOf({ host: n.host, port: n.port, username: auth.username, password: auth.password, ...tls }).url
  })
  if (seeds.length === 0) throw invalidValue('clients', 'holds an ioredis Cluster without startup nodes')
  return { seeds, keyPrefix: o.keyPrefix || '', tls: auth.tls ? connectionOf({ host: '127.0.0.1', ...tls }).tls : undefined }
}

/**
 * One LockClient for the members, one lock node each: a plain client is a
 * Redis master, an ioredis `Cluster` a whole cluster (keys routed by slot).
 */
function lockClientFor(clients, driftFactor) {
  const members = clients.map((c, i) => {
    const cluster = clusterOf(c)
    if (cluster) return { node: { cluster: cluster.seeds }, keyPrefix: cluster.keyPrefix, tls: cluster.tls }
    const conn = connectionOf(c, `clients[${i}]`)
    return { node: conn.url, keyPrefix: conn.keyPrefix, tls: conn.tls }
  })
  const prefixes = new Set(members.map((m) => m.keyPrefix || ''))
  if (prefixes.size > 1) {
    throw invalidValue('clients', `must share one keyPrefix (lockdog applies one on every member); got ${[...prefixes].map((p) => JSON.stringify(p)).join(', ')}`)
  }
  const tls = members.find((m) => m.tls)
  return new LockClient({
    nodes: members.map((m) => m.node),
    keyPrefix: members[0].keyPrefix || '',
    driftFactor,
    ...(tls ? { tls: tls.tls } : {}),
  })
}

/** `base` (a Redlock's settings) with a call's own `settings` over it, checked. */
function settingsFor(base, settings) {
  return settings ? { ...base, ...checkSettings(settings, 'settings') } : base
}

/**
 * redlock's executor: `attempt()` resolves `{ ok, stats, value, final }`;
 * retried up to `s.retryCount` times (-1: no limit) `retryDelay ± retryJitter`
 * apart; resolves the attempts, or rejects an ExecutionError with them.
 */
async function execute(attempt, s) {
  const maxAttempts = s.retryCount === -1 ? Infinity : s.retryCount + 1
  const attempts = []
  for (;;) {
    const { ok, stats, value, final } = await attempt()
    attempts.push(Promise.resolve(stats))
    if (ok) return { attempts, value }
    if (final || attempts.length >= maxAttempts) throw new ExecutionError(QUORUM_MESSAGE, attempts)
    const pause = Math.max(0, s.retryDelay + Math.floor((Math.random() * 2 - 1) * s.retryJitter))
    await new Promise((resolve) => setTimeout(resolve, pause))
  }
}

module.exports = {
  DEFAULT_SETTINGS,
  QUORUM_MESSAGE,
  UNREACHABLE_MESSAGE,
  expiration,
  coded,
  checkDuration,
  checkSettings,
  settingsFor,
  checkLock,
  clusterOf,
  lockClientFor,
  execute,
}
