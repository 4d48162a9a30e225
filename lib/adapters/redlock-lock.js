'use strict'

// What the redlock drop-in hands out, shaped as redlock 5 shapes it: its Lock,
// ExecutionError and ResourceLockedError, with inspect output that shows the
// given clients by address only (never their options or passwords).

const { inspect } = require('node:util')

/** A resource is held by another value on a node (redlock's wording: "applied to: N of M"). */
class ResourceLockedError extends Error {
  constructor(message) {
    super(message)
    this.name = 'ResourceLockedError'
  }
}

/** Where a client connects, without credentials or options (for inspect output). */
function clientLabel(client) {
  const strip = (url) => {
    try {
      const u = new URL(url)
      u.username = ''
      u.password = ''
      return u.toString()
    } catch {
      return 'redis'
    }
  }
  if (typeof client === 'string') return strip(client)
  if (!client || typeof client !== 'object') return String(client)
  const cls = client.constructor && client.constructor.name
  const name = cls && cls !== 'Object' && cls !== 'EventEmitter' ? cls : 'client'
  const o = client.options && typeof client.options === 'object' ? client.options : client
  if (client.isCluster) return `${name} cluster`
  if (typeof o.url === 'string') return `${name} ${strip(o.url)}`
  const s = o.socket && typeof o.socket === 'object' ? o.socket : o
  if (s.path) return `${name} ${s.path}`
  if (s.host || s.port) return `${name} ${s.host || '127.0.0.1'}:${s.port || 6379}`
  return name
}

/** A client as inspect output shows it: its class and address only. */
class ClientRef {
  constructor(client) {
    this.label = clientLabel(client)
  }

  [inspect.custom]() {
    return `[${this.label}]`
  }
}

/** Each attempt promise's votes once known, for inspect output. */
const settledVotes = new WeakMap()

/** `attempts` as inspect output shows them: each attempt's votes, clients by address. */
function shownAttempts(attempts) {
  return attempts.map((attempt) => {
    if (settledVotes.has(attempt)) return shownVotes(settledVotes.get(attempt))
    if (attempt && typeof attempt.then === 'function') {
      attempt.then((stats) => settledVotes.set(attempt, stats), () => {})
    }
    return '<pending>'
  })
}

/** An attempt's votes with each client shown as a ClientRef (never its options or password). */
function shownVotes(stats) {
  if (!stats || typeof stats !== 'object') return stats
  return {
    membershipSize: stats.membershipSize,
    quorumSize: stats.quorumSize,
    votesFor: new Set([...stats.votesFor].map((c) => new ClientRef(c))),
    votesAgainst: new Map([...stats.votesAgainst].map(([c, e]) => [new ClientRef(c), e])),
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
    shownAttempts(attempts)
  }

  /** As redlock's, with the clients shown by address only: never their options or passwords. */
  [inspect.custom](depth, options, show = inspect) {
    const fields = {
      code: this.code,
      attempts: shownAttempts(this.attempts),
    }
    if ('cause' in this) fields.cause = this.cause
    const nested = { ...options, depth: options.depth == null ? null : options.depth - 1 }
    return `${this.stack} ${show(fields, nested)}`
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
    shownAttempts(attempts)
  }

  /** As redlock's, with the attempts' clients shown by address only. */
  [inspect.custom](depth, options, show = inspect) {
    const nested = { ...options, depth: options.depth == null ? null : options.depth - 1 }
    const fields = { redlock: this.redlock, resources: this.resources, value: this.value, attempts: shownAttempts(this.attempts), expiration: this.expiration }
    return `Lock ${show(fields, nested)}`
  }

  async release() {
    return this.redlock.release(this)
  }

  async extend(duration) {
    return this.redlock.extend(this, duration)
  }
}

module.exports = { Lock, ExecutionError, ResourceLockedError, ClientRef }
