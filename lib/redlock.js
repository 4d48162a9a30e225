'use strict'

// A drop-in for the `redlock` package (5.0.0-beta.2) on lockdog's native quorum
// lock. Every operation runs as redlock runs it: attempts of one try each, votes
// per client (`votesFor` a Set of the given clients, `votesAgainst` a Map
// client -> Error), an 'error' event per vote against, `retryCount + 1`
// attempts `retryDelay ± retryJitter` apart, whatever made the votes fail (a
// held key or an unreachable node). Keys are stored as redlock stores them:
// each resource name holds the lock's value. The deliberate differences are
// listed in the README's migration section.

const { EventEmitter } = require('node:events')
const { randomUUID } = require('node:crypto')
const { LockClient } = require('./client')
const { invalidType, invalidValue } = require('./errors')
const { keyList } = require('./validate')
const { connectionOf } = require('./compat')

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

/** A resource is held by another value on a node (redlock's wording: "applied to: N of M"). */
class ResourceLockedError extends Error {
  constructor(message) {
    super(message)
    this.name = 'ResourceLockedError'
  }
}

/**
 * An operation could not reach a quorum within its retry window. `attempts` are
 * promises of each attempt's votes; `code` is lockdog's code (ERR_LOCK_QUORUM,
 * or ERR_LOCK_LOST when `using` found its lock gone).
 */
class ExecutionError extends Error {
  constructor(message, attempts = [], detail = {}) {
    super(message, 'cause' in detail ? { cause: detail.cause } : undefined)
    this.name = 'ExecutionError'
    this.attempts = attempts
    this.code = detail.code || 'ERR_LOCK_QUORUM'
  }
}

/** A lock as redlock returns it; `expiration` is a wall-clock ms timestamp. */
class Lock {
  constructor(redlock, resources, value, attempts, expiration) {
    this.redlock = redlock
    this.resources = resources
    this.value = value
    this.attempts = attempts
    this.expiration = expiration
  }

  async release() {
    return this.redlock.release(this)
  }

  async extend(duration) {
    return this.redlock.extend(this, duration)
  }
}

/** The native lock behind each Lock (several Lock objects share one after `extend`). */
const innerOf = new WeakMap()

/**
 * When a lock's validity ends (wall clock): the core's validity, counted from
 * the attempt that succeeded. Without resources, as redlock counts it.
 */
function expiration(inner, start, duration, settings, clientDrift) {
  const drift = (factor) => Math.round(factor * duration) + 2
  if (!inner) return start + duration - drift(settings.driftFactor)
  // The core's validity allows for the constructor's driftFactor; a call's own replaces it.
  return Date.now() + Math.floor(inner.remaining) + drift(clientDrift) - drift(settings.driftFactor)
}

/** redlock's error, class and message, with lockdog's stable `code`. */
function coded(error, code) {
  error.code = code
  return error
}

function checkDuration(duration) {
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

class Redlock extends EventEmitter {
  #client
  #members
  /** Node faults the core reported (`{ index, answer, node, detail, at }`), kept while an attempt may claim them. */
  #faults = []
  /** Start times of the attempts in flight (by a token of each attempt). */
  #inflight = new Map()

  /**
   * @param clients ioredis clients (or node-redis clients, URLs, options), one per
   *   independent Redis master; an ioredis `Cluster` is one member too.
   */
  constructor(clients, settings = {}, scripts = {}) {
    super()
    // As in redlock: a listener of its own, so an 'error' never crashes the process.
    this.on('error', () => {})
    if (clients == null || typeof clients[Symbol.iterator] !== 'function' || typeof clients === 'string') {
      throw invalidType('clients', 'an iterable of Redis clients', clients)
    }
    this.clients = new Set(clients)
    if (this.clients.size === 0) {
      throw coded(new Error('Redlock must be instantiated with at least one redis client.'), 'ERR_INVALID_ARG_VALUE')
    }
    if (scripts && Object.values(scripts).some((s) => typeof s === 'function')) {
      throw invalidValue('scripts', 'cannot modify lockdog\'s scripts (they are token-checked and fixed)')
    }
    this.settings = { ...DEFAULT_SETTINGS, ...checkSettings(settings, 'settings') }
    this.#members = [...this.clients]
    this.#client = lockClientFor(this.#members, this.settings.driftFactor)
    const names = this.#client.nodes
    this.#client.on('error', (err) => this.#fault(err, names))
  }

  /**
   * A node fault the core reported. During an attempt, the attempt's votes
   * carry it (a successful attempt learns its minority faults only this way);
   * otherwise (a renewal in `using`) it is emitted at once.
   */
  #fault(err, names) {
    const node = err.nodes && err.nodes[0]
    const index = node ? names.indexOf(node.node) : -1
    const at = performance.now()
    if (this.#inflight.size > 0 && index >= 0) {
      this.#faults.push({ index, answer: node.answer, node: node.node, detail: node.detail, at })
      return
    }
    this.#emitError(node && node.answer === 'error' ? new Error(node.detail, { cause: err }) : new Error(UNREACHABLE_MESSAGE, { cause: err }))
  }

  /** The faults reported since `start`, by member index; forgets those no attempt can claim. */
  #faultsSince(start) {
    const oldest = Math.min(start, ...this.#inflight.values())
    this.#faults = this.#faults.filter((f) => f.at >= oldest)
    const out = new Map()
    for (const f of this.#faults) if (f.at >= start && !out.has(f.index)) out.set(f.index, f)
    return out
  }

  /** Quits the given clients and closes lockdog's own connections. */
  async quit() {
    await this.#client.close()
    await Promise.all(this.#members.map((c) => (c && typeof c.quit === 'function' ? c.quit() : undefined)))
  }

  #emitError(error) {
    // Emitting without a listener would throw; someone may have removed ours.
    if (this.listenerCount('error') > 0) this.emit('error', error)
  }

  /** The votes of one attempt from the core's per-node answers (`ok` is a vote for). */
  #votes(answers, keyCount, fallback) {
    const stats = {
      membershipSize: this.#members.length,
      quorumSize: Math.floor(this.#members.length / 2) + 1,
      votesFor: new Set(),
      votesAgainst: new Map(),
    }
    this.#members.forEach((client, i) => {
      const a = answers ? answers[i] : null
      let error = null
      if (a == null) error = fallback
      else if (a.answer === 'held' || a.answer === 'not-held') {
        error = new ResourceLockedError(`The operation was applied to: 0 of the ${keyCount} requested resources.`)
      } else if (a.answer === 'unreachable' || a.answer === 'timeout') {
        error = new Error(UNREACHABLE_MESSAGE, { cause: new Error(`${a.node}: ${a.detail}`) })
      } else if (a.answer !== 'ok') error = new Error(a.detail)
      if (error) {
        stats.votesAgainst.set(client, error)
        this.#emitError(error)
      } else stats.votesFor.add(client)
    })
    return stats
  }

  /** The votes of an attempt that failed as a whole with `err` (a LockError or an argument error). */
  #votesOf(err, keyCount) {
    if (Array.isArray(err.nodes) && err.nodes.length === this.#members.length) {
      return this.#votes(err.nodes, keyCount, null)
    }
    const answer = { ERR_LOCK_TAKEN: 'held', ERR_LOCK_LOST: 'not-held', ERR_LOCK_CONNECTION: 'unreachable' }[err.code]
    const detail = err.message
    if (answer) return this.#votes(this.#members.map(() => ({ answer, node: '', detail })), keyCount, null)
    // Any other failure is a vote against on every member, each its own error object.
    return this.#votes(null, keyCount, err)
  }

  /**
   * redlock's executor: `attempt()` resolves `{ ok, stats }`; retried up to
   * `retryCount` times (-1: no limit); resolves the attempts, or rejects an
   * ExecutionError with them.
   */
  async #execute(attempt, settings) {
    const s = settings ? { ...this.settings, ...checkSettings(settings, 'settings') } : this.settings
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

  /**
   * Runs one native operation as one attempt. A run resolving `false` found the
   * lock gone or foreign; with `lossIsFinal` no retry can change that.
   */
  async #attempt(keyCount, run, lossIsFinal = false, lockOf = null) {
    const start = performance.now()
    const token = {}
    this.#inflight.set(token, start)
    let settling = false
    try {
      const value = await run()
      if (value === false) {
        // A release by value reports each member's own answer (a member that
        // held the value voted for); any other loss is every member's vote against.
        const byValue = lockOf && lockOf()
        const stats = byValue && byValue.byValue
          ? this.#votes(byValue.nodes, keyCount, null)
          : this.#votesOf({ code: 'ERR_LOCK_LOST', message: '' }, keyCount)
        return { ok: false, final: lossIsFinal, stats }
      }
      // As in redlock, an attempt ends once every member answered: the core
      // resolves at quorum and finishes the other nodes in the background.
      await this.#client.settled()
      // The core resolves at quorum and reports a minority's faults as events
      // once those nodes answer: an attempt's votes are a promise, as in redlock,
      // and the attempt keeps claiming faults until they are in.
      settling = true
      const stats = this.#client.settled().then(async () => {
        await new Promise((resolve) => setImmediate(resolve))
        const faults = this.#faultsSince(start)
        this.#inflight.delete(token)
        const fromFaults = (i) => {
          const f = faults.get(i)
          return f ? { answer: f.answer, node: f.node, detail: f.detail } : { answer: 'ok' }
        }
        // The lock's per-node answers to this operation, final now that it settled.
        const inner = lockOf ? lockOf() : null
        const nodes = inner ? inner.nodes : null
        const answers = this.#members.map((_, i) => {
          const n = nodes && nodes.length === this.#members.length ? nodes[i] : null
          return n && n.answer !== 'pending' ? n : fromFaults(i)
        })
        return this.#votes(answers, keyCount, null)
      })
      return { ok: true, value, stats }
    } catch (e) {
      return { ok: false, stats: this.#votesOf(e, keyCount) }
    } finally {
      if (!settling) this.#inflight.delete(token)
    }
  }

  /**
   * The lockdog lock behind `lock`: the one acquire or extend made, else (a
   * Lock rebuilt from a stored value) its keys adopted by their token with a
   * lease of `ttl` ms, which is redlock's token-checked extend. null without
   * resources; false when the keys are gone or hold another value on every
   * member. A loss with per-member answers rejects with them: they are the
   * votes (a member that still held the value voted for).
   */
  async #innerOf(lock, ttl) {
    const known = innerOf.get(lock)
    if (known) return known
    if (lock.resources.length === 0) return null
    const keys = keyList(lock.resources, 'lock.resources')
    try {
      const inner = await this.#client.adopt(keys, lock.value, { ttl, autoRenew: false })
      innerOf.set(lock, inner)
      return inner
    } catch (e) {
      if (e && e.code === 'ERR_LOCK_LOST' && !(Array.isArray(e.nodes) && e.nodes.length > 0)) return false
      throw e
    }
  }

  /** Acquires every resource in `resources` as one lock for `duration` ms (not renewed). */
  async acquire(resources, duration, settings) {
    checkDuration(duration)
    return this.#acquire(resources, duration, settings, false)
  }

  async #acquire(resources, duration, settings, autoRenew) {
    const start = Date.now()
    const s = settings ? { ...this.settings, ...checkSettings(settings, 'settings') } : this.settings
    const empty = Array.isArray(resources) && resources.length === 0
    const keyCount = Array.isArray(resources) ? resources.length : 0
    let last = null
    const once = () => this.#attempt(keyCount, () => {
      // No resources: nothing to take, every member agrees (as redlock's script does).
      if (empty) return null
      const keys = keyList(resources, 'resources')
      return this.#client.acquire(keys, { ttl: duration, retryCount: 0, autoRenew }).then((inner) => {
        last = inner
        return inner
      })
    }, false, () => last)
    let result
    try {
      result = await this.#execute(once, settings)
    } catch (error) {
      // redlock's cleanup release after a failed acquisition: each member that
      // does not hold the value votes against it once more. lockdog's core has
      // already released the attempt's partial hold.
      if (error instanceof ExecutionError) {
        const lastStats = await error.attempts[error.attempts.length - 1]
        for (const [client, vote] of lastStats.votesAgainst) {
          void client
          this.#emitError(vote instanceof ResourceLockedError
            ? new ResourceLockedError(`The operation was applied to: 0 of the ${keyCount} requested resources.`)
            : vote)
        }
      }
      throw error
    }
    const lock = new Lock(this, resources, last ? last.token : randomUUID(), result.attempts,
      expiration(last, start, duration, s, this.settings.driftFactor))
    if (last) innerOf.set(lock, last)
    return lock
  }

  /**
   * Releases `lock` on every member. Rejects an ExecutionError when no quorum
   * held it (already expired or released), after `retryCount` retries, as redlock does.
   */
  async release(lock, settings) {
    checkLock(lock)
    lock.expiration = 0
    const keyCount = lock.resources.length
    let inner = null
    const release = async () => {
      inner = innerOf.get(lock) || null
      if (inner) return inner.release()
      if (lock.resources.length === 0) return true
      // A Lock rebuilt from a stored value: a token-checked delete on every
      // member, each voting for where it held the value.
      const { released, nodes } = await this.#client.releaseToken(keyList(lock.resources, 'lock.resources'), lock.value)
      inner = { nodes, byValue: true }
      return released
    }
    const { attempts } = await this.#execute(() => this.#attempt(keyCount, release, false, () => inner), settings)
    return { attempts }
  }

  /** Extends `existing` to `duration` ms from now; resolves a new Lock (this one's expiration becomes 0). */
  async extend(existing, duration, settings) {
    checkLock(existing)
    checkDuration(duration)
    const start = Date.now()
    if (existing.expiration < Date.now()) throw new ExecutionError('Cannot extend an already-expired lock.', [])
    let inner = innerOf.get(existing)
    const keyCount = existing.resources.length
    const { attempts } = await this.#execute(() => this.#attempt(keyCount, async () => {
      if (inner) {
        await inner.extend(duration)
        return true
      }
      // A Lock rebuilt from a stored value: adopting it is the token-checked extend.
      inner = await this.#innerOf(existing, duration)
      return inner === false ? false : true
    }, false, () => inner), settings)
    if (inner === false) inner = undefined
    existing.expiration = 0
    const s = settings ? { ...this.settings, ...checkSettings(settings, 'settings') } : this.settings
    const lock = new Lock(this, existing.resources, existing.value, attempts, expiration(inner, start, duration, s, this.settings.driftFactor))
    if (inner) innerOf.set(lock, inner)
    return lock
  }

  /**
   * Runs `routine(signal)` holding `resources`, renewed by lockdog's native
   * watchdog (not a JS timer). If the lock is lost, `signal.error` is set and the
   * signal aborts. Releases when the routine settles, as redlock does: a release
   * that finds the lock gone rejects (ExecutionError, code ERR_LOCK_LOST, with
   * the routine's result or error as `cause`).
   */
  async using(resources, duration, settingsOrRoutine, optionalRoutine) {
    checkDuration(duration)
    const settings = settingsOrRoutine && typeof settingsOrRoutine !== 'function'
      ? { ...this.settings, ...checkSettings(settingsOrRoutine, 'settings') }
      : this.settings
    const routine = optionalRoutine ?? settingsOrRoutine
    if (typeof routine !== 'function') throw coded(new Error('INVARIANT: routine is not a function.'), 'ERR_INVALID_ARG_TYPE')
    if (settings.automaticExtensionThreshold > duration - 100) {
      throw new Error('A lock `duration` must be at least 100ms greater than the `automaticExtensionThreshold` setting.')
    }
    const controller = new AbortController()
    const signal = controller.signal
    const lock = await this.#acquire(resources, duration, settings, true)
    const inner = innerOf.get(lock)
    let lost = null
    const onLost = () => {
      lost = inner.signal.reason
      signal.error = new ExecutionError(QUORUM_MESSAGE, [], { code: 'ERR_LOCK_LOST', cause: lost })
      controller.abort()
    }
    if (inner) {
      if (inner.signal.aborted) onLost()
      else inner.signal.addEventListener('abort', onLost, { once: true })
    }
    let outcome
    try {
      outcome = { value: await routine(signal) }
    } catch (error) {
      outcome = { error }
    } finally {
      if (inner) inner.signal.removeEventListener('abort', onLost)
    }
    lock.expiration = 0
    try {
      // A release that finds the lock gone or foreign is a loss, reported at once:
      // retrying cannot bring it back, and `using` must settle.
      await this.#execute(() => this.#attempt(lock.resources.length, () => (inner ? inner.release() : true), true, () => inner))
    } catch (error) {
      if (error instanceof ExecutionError) {
        error.code = 'ERR_LOCK_LOST'
        error.cause = 'error' in outcome ? outcome.error : outcome.value
      }
      throw error
    }
    if ('error' in outcome) throw outcome.error
    return outcome.value
  }
}

Redlock.default = Redlock
Redlock.Redlock = Redlock
Redlock.Lock = Lock
Redlock.ExecutionError = ExecutionError
Redlock.ResourceLockedError = ResourceLockedError

module.exports = Redlock
