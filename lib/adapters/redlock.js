'use strict'

// A drop-in for the `redlock` package (5.0.0-beta.2) on lockdog's native quorum
// lock. Every operation runs as redlock runs it: attempts of one try each, votes
// per client (`votesFor` a Set of the given clients, `votesAgainst` a Map
// client -> Error), an 'error' event per vote against, `retryCount + 1`
// attempts `retryDelay ± retryJitter` apart, whatever made the votes fail (a
// held key or an unreachable node). Keys are stored as redlock stores them:
// each resource name holds the lock's value. The deliberate differences are
// listed in docs/migrating.md ("Deliberate differences").

const { EventEmitter } = require('node:events')
const { inspect } = require('node:util')
const { randomUUID } = require('node:crypto')
const { quorumSize } = require('../../binding.js')
const { invalidType, invalidValue } = require('../errors')
const { keyList } = require('../validate')
const { unaddressable, coded } = require('./connection')
const { Lock, ExecutionError, ResourceLockedError, ClientRef } = require('./redlock-lock')
const {
  DEFAULT_SETTINGS, QUORUM_MESSAGE, UNREACHABLE_MESSAGE, expiration, checkDuration, checkSettings, settingsFor,
  checkLock, clusterOf, lockClientFor, execute,
} = require('./redlock-settings')
const { DirectMembers } = require('./redlock-direct')

/** The native lock behind each Lock (several Lock objects share one after `extend`). */
const innerOf = new WeakMap()

/** redlock 5's `Redlock`: one lockdog LockClient whose nodes are the given clients' servers. */
class Redlock extends EventEmitter {
  #client
  #members
  /** The members' scripts run through the clients themselves (see redlock-direct.js), or null. */
  #direct = null
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
    // A client lockdog cannot reach a server for (ioredis-mock, a custom
    // Connector, Sentinel) is used as redlock uses it: through its own eval.
    if (this.#members.some((c) => clusterOf(c) === null && unaddressable(c))) {
      this.#members.forEach((c, i) => {
        if (!c || typeof c.eval !== 'function') {
          throw coded(invalidValue(`clients[${i}]`, 'cannot run scripts (no eval) beside a client lockdog cannot reach a server for'), 'ERR_LOCK_UNREACHABLE_CLIENT')
        }
      })
      this.#direct = new DirectMembers(this, this.#members, (error) => this.#emitError(error))
      return
    }
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
    if (this.#client) await this.#client.close()
    await Promise.all(this.#members.map((c) => (c && typeof c.quit === 'function' ? c.quit() : undefined)))
  }

  /** The clients by address only (never their options or passwords) and the settings. */
  [inspect.custom](depth, options, show = inspect) {
    const nested = { ...options, depth: options.depth == null ? null : options.depth - 1 }
    return `Redlock ${show({ clients: [...this.clients].map((c) => new ClientRef(c)), settings: this.settings }, nested)}`
  }

  #emitError(error) {
    // Emitting without a listener would throw; someone may have removed ours.
    if (this.listenerCount('error') > 0) this.emit('error', error)
  }

  /** The votes of one attempt from the core's per-node answers (`ok` is a vote for). */
  #votes(answers, keyCount, fallback) {
    const stats = {
      membershipSize: this.#members.length,
      quorumSize: quorumSize(this.#members.length),
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

  #execute(attempt, settings) {
    return execute(attempt, settingsFor(this.settings, settings))
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
    if (this.#direct) return this.#direct.acquire(resources, duration, settings)
    return this.#acquire(resources, duration, settings, false)
  }

  async #acquire(resources, duration, settings, autoRenew) {
    const start = Date.now()
    const s = settingsFor(this.settings, settings)
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
    if (this.#direct) return this.#direct.release(lock, settings)
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
    if (this.#direct) return this.#direct.extend(existing, duration, settings)
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
    const s = settingsFor(this.settings, settings)
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
      ? settingsFor(this.settings, settingsOrRoutine)
      : this.settings
    const routine = optionalRoutine ?? settingsOrRoutine
    if (typeof routine !== 'function') throw coded(new Error('INVARIANT: routine is not a function.'), 'ERR_INVALID_ARG_TYPE')
    if (settings.automaticExtensionThreshold > duration - 100) {
      throw coded(new Error('A lock `duration` must be at least 100ms greater than the `automaticExtensionThreshold` setting.'), 'ERR_INVALID_ARG_VALUE')
    }
    if (this.#direct) return this.#direct.using(resources, duration, settings, routine)
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
