'use strict'

// The redlock drop-in's mode for clients lockdog cannot reach a server for
// (ioredis-mock, a custom Connector, Sentinel): redlock's own scripts run
// through the given clients' `eval`, as redlock runs them, with its votes,
// retries and JS-timer extension.

const { randomUUID } = require('node:crypto')
const { quorumSize } = require('../../binding.js')
const { keyList } = require('../validate')
const { Lock, ExecutionError, ResourceLockedError } = require('./redlock-lock')
const { QUORUM_MESSAGE, expiration, settingsFor, execute } = require('./redlock-settings')
const { coded } = require('./connection')

/**
 * How long one member's vote is waited for, at most (lockdog's default
 * `commandTimeout`); for an acquire or an extend also no longer than the
 * lease could still be valid when it came. A member that has not answered by
 * then votes against, and the call goes on without it.
 */
const VOTE_TIMEOUT_MS = 1000

/**
 * `promise`, or a rejection once `ms` passed. The timer keeps the process
 * alive meanwhile: a caller waits for this answer, and a member that never
 * answers may hold nothing else open (a mock).
 */
function withinMs(promise, ms) {
  let timer
  const late = new Promise((resolve, reject) => {
    timer = setTimeout(() => {
      reject(coded(new Error(`The member did not answer within ${ms} ms.`), 'ERR_LOCK_CONNECTION'))
    }, ms)
  })
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}

// redlock's own scripts, for clients lockdog cannot reach a server for: they
// run through the given clients, as redlock runs them (e.g. in ioredis-mock's memory).
const ACQUIRE_SCRIPT = `
for i, key in ipairs(KEYS) do
  if redis.call("exists", key) == 1 then return 0 end
end
for i, key in ipairs(KEYS) do
  redis.call("set", key, ARGV[1], "PX", ARGV[2])
end
return #KEYS`
const EXTEND_SCRIPT = `
for i, key in ipairs(KEYS) do
  if redis.call("get", key) ~= ARGV[1] then return 0 end
end
for i, key in ipairs(KEYS) do
  redis.call("set", key, ARGV[1], "PX", ARGV[2])
end
return #KEYS`
const RELEASE_SCRIPT = `
local count = 0
for i, key in ipairs(KEYS) do
  if redis.call("get", key) == ARGV[1] then
    if redis.call("del", key) == 1 then count = count + 1 end
  end
end
return count`

/** The operations of one Redlock whose members all run scripts through their own `eval`. */
class DirectMembers {
  #redlock
  #members
  #emit

  constructor(redlock, members, emitError) {
    this.#redlock = redlock
    this.#members = members
    this.#emit = emitError
  }

  #execute(attempt, settings) {
    return execute(attempt, settingsFor(this.#redlock.settings, settings))
  }

  /**
   * One script on every member through the client itself: redlock's votes,
   * each waited for `boundMs` at most. Members that had not answered by then
   * are in `late`, with the promise of their answer.
   */
  async #attempt(script, keys, args, boundMs = VOTE_TIMEOUT_MS) {
    const stats = {
      membershipSize: this.#members.length,
      quorumSize: quorumSize(this.#members.length),
      votesFor: new Set(),
      votesAgainst: new Map(),
    }
    const late = []
    await Promise.all(this.#members.map(async (client) => {
      let answer
      try {
        answer = Promise.resolve(client.eval(script, keys.length, ...keys, ...args))
        const applied = Number(await withinMs(answer, Math.max(1, boundMs)))
        if (applied === keys.length) stats.votesFor.add(client)
        else throw new ResourceLockedError(`The operation was applied to: ${applied} of the ${keys.length} requested resources.`)
      } catch (error) {
        if (error && error.code === 'ERR_LOCK_CONNECTION' && answer) late.push({ client, answer })
        stats.votesAgainst.set(client, error)
        this.#emit(error)
      }
    }))
    return { ok: stats.votesFor.size >= stats.quorumSize, stats, late }
  }

  /** Releases `keys` on one member (best effort, bounded). */
  #releaseOn(client, keys, value) {
    return withinMs(Promise.resolve(client.eval(RELEASE_SCRIPT, keys.length, ...keys, value)), VOTE_TIMEOUT_MS).catch(() => {})
  }

  /**
   * An attempt to take or extend the lease: a quorum that came too late to
   * leave any validity is no quorum (its votes are taken back, on release);
   * a member that answers after its vote timed out has its grant taken back
   * if the call failed in the end (`owed`).
   */
  async #leaseAttempt(script, keys, value, duration, s, owed) {
    const start = Date.now()
    const validity = () => expiration(null, start, duration, s, s.driftFactor) - Date.now()
    const result = await this.#attempt(script, keys, [value, duration], Math.min(VOTE_TIMEOUT_MS, validity()))
    for (const { client, answer } of result.late) owed.push(answer.then(() => client, () => null))
    if (result.ok && validity() <= 0) {
      const error = new ResourceLockedError(`The quorum answered after the lock's validity of ${duration} ms had run out.`)
      for (const client of result.stats.votesFor) {
        result.stats.votesAgainst.set(client, error)
        this.#releaseOn(client, keys, value)
      }
      result.stats.votesFor.clear()
      result.ok = false
    }
    return { ...result, start }
  }

  /** Takes back, once they answer, what late members granted a call that failed. */
  #takeBackLate(owed, keys, value) {
    for (const answered of owed) {
      answered.then((client) => client && this.#releaseOn(client, keys, value))
    }
  }

  async acquire(resources, duration, settings) {
    const s = settingsFor(this.#redlock.settings, settings)
    const keys = Array.isArray(resources) && resources.length === 0 ? [] : keyList(resources, 'resources')
    const value = randomUUID()
    const owed = []
    let start
    let attempts
    try {
      ({ attempts } = await this.#execute(async () => {
        const result = await this.#leaseAttempt(ACQUIRE_SCRIPT, keys, value, duration, s, owed)
        start = result.start
        return result
      }, settings))
    } catch (error) {
      // As redlock does: take back whatever a minority granted.
      await this.#attempt(RELEASE_SCRIPT, keys, [value]).catch(() => {})
      this.#takeBackLate(owed, keys, value)
      throw error
    }
    return new Lock(this.#redlock, resources, value, attempts, expiration(null, start, duration, s, s.driftFactor))
  }

  async release(lock, settings) {
    const keys = lock.resources.length === 0 ? [] : keyList(lock.resources, 'lock.resources')
    const { attempts } = await this.#execute(() => this.#attempt(RELEASE_SCRIPT, keys, [lock.value]), settings)
    return { attempts }
  }

  async extend(existing, duration, settings) {
    const s = settingsFor(this.#redlock.settings, settings)
    const keys = existing.resources.length === 0 ? [] : keyList(existing.resources, 'lock.resources')
    let start
    const { attempts } = await this.#execute(async () => {
      const result = await this.#leaseAttempt(EXTEND_SCRIPT, keys, existing.value, duration, s, [])
      start = result.start
      return result
    }, settings)
    existing.expiration = 0
    return new Lock(this.#redlock, existing.resources, existing.value, attempts, expiration(null, start, duration, s, s.driftFactor))
  }

  /** `using` through the clients: extended by a timer `automaticExtensionThreshold` ms before expiry, as redlock does. */
  async using(resources, duration, settings, routine) {
    const controller = new AbortController()
    const signal = controller.signal
    let lock = await this.acquire(resources, duration, settings)
    let timer
    let extending = null
    const schedule = () => {
      timer = setTimeout(() => {
        extending = this.extend(lock, duration, settings).then((next) => {
          lock = next
          extending = null
          schedule()
        }, (error) => {
          extending = null
          signal.error = new ExecutionError(QUORUM_MESSAGE, [], { code: 'ERR_LOCK_LOST', cause: error })
          controller.abort()
        })
      }, Math.max(0, lock.expiration - Date.now() - settings.automaticExtensionThreshold))
    }
    schedule()
    try {
      return await routine(signal)
    } finally {
      clearTimeout(timer)
      if (extending) await extending
      await this.release(lock)
    }
  }
}

module.exports = { DirectMembers }
