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

  /** One script on every member through the client itself: redlock's votes. */
  async #attempt(script, keys, args) {
    const stats = {
      membershipSize: this.#members.length,
      quorumSize: quorumSize(this.#members.length),
      votesFor: new Set(),
      votesAgainst: new Map(),
    }
    await Promise.all(this.#members.map(async (client) => {
      try {
        const applied = Number(await client.eval(script, keys.length, ...keys, ...args))
        if (applied === keys.length) stats.votesFor.add(client)
        else throw new ResourceLockedError(`The operation was applied to: ${applied} of the ${keys.length} requested resources.`)
      } catch (error) {
        stats.votesAgainst.set(client, error)
        this.#emit(error)
      }
    }))
    return { ok: stats.votesFor.size >= stats.quorumSize, stats }
  }

  async acquire(resources, duration, settings) {
    const s = settingsFor(this.#redlock.settings, settings)
    const keys = Array.isArray(resources) && resources.length === 0 ? [] : keyList(resources, 'resources')
    const value = randomUUID()
    let start
    let attempts
    try {
      ({ attempts } = await this.#execute(() => {
        start = Date.now()
        return this.#attempt(ACQUIRE_SCRIPT, keys, [value, duration])
      }, settings))
    } catch (error) {
      // As redlock does: take back whatever a minority granted.
      await this.#attempt(RELEASE_SCRIPT, keys, [value]).catch(() => {})
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
    const { attempts } = await this.#execute(() => {
      start = Date.now()
      return this.#attempt(EXTEND_SCRIPT, keys, [existing.value, duration])
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
