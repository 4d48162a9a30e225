'use strict'

// Counting semaphores on lockdog's native core: the same acquire loop, quorum,
// watchdog and loss reporting as locks; each holder is a Lock.

const { kAcquireWith, kWithLock, kNative, kFair, takenAsNull } = require('./internal')
const { withStack, invalidType, invalidValue, outOfRange } = require('./errors')
const { keyList, assertFunction, pick, ACQUIRE, ACQUIRE_JS } = require('./validate')

/** The largest limit (every acquisition counts the holders). */
const MAX_LIMIT = 100000

const SEMAPHORE = { ...ACQUIRE, limit: 'number', fair: 'boolean' }
const PERMIT = { ...ACQUIRE_JS, permits: 'number', fair: 'boolean' }

function checkCount(name, value, max, range) {
  if (!Number.isSafeInteger(value) || value < 1 || value > max) throw outOfRange(name, range, value)
}

/**
 * At most `limit` permits of one key held at once, across every process and
 * client. Each holder is a `Lock` (token, lease, signal, onLost, release,
 * extend) renewed by the native watchdog in the same batches as locks.
 */
class Semaphore {
  #client
  #key
  #limit
  #defaults

  constructor(client, key, options) {
    if (typeof key !== 'string') throw invalidType('key', 'of type string', key)
    keyList(key)
    const opts = pick(options, SEMAPHORE)
    if (opts.limit === undefined) throw invalidValue('options.limit', 'is required (the most permits held at once)')
    checkCount('options.limit', opts.limit, MAX_LIMIT, `an integer >= 1 and <= ${MAX_LIMIT}`)
    this.#client = client
    this.#key = key
    this.#limit = opts.limit
    delete opts.limit
    this.#defaults = opts
  }

  /** The semaphore's key (without the client's keyPrefix). */
  get key() {
    return this.#key
  }

  /** The most permits held at once. */
  get limit() {
    return this.#limit
  }

  #start(options, once) {
    const opts = { ...this.#defaults, ...pick(options, PERMIT) }
    const permits = opts.permits ?? 1
    if (typeof permits !== 'number') throw invalidType('options.permits', 'of type number', permits)
    checkCount('options.permits', permits, this.#limit, `an integer >= 1 and <= limit (${this.#limit})`)
    const { signal, onLost } = opts
    const fair = opts.fair ?? this.#client[kFair]
    delete opts.permits
    delete opts.signal
    delete opts.onLost
    delete opts.fair
    if (once) opts.retryCount = 0
    const native = Object.assign(Object.create(null), opts)
    return this.#client[kAcquireWith]([this.#key], native, { limit: this.#limit, permits, fair }, signal, onLost)
  }

  /**
   * Takes `permits` (default 1) all or nothing, waiting while too few are
   * free as `waitTimeout`, `retryCount` and `signal` allow; a release wakes
   * as many waiters as it frees permits. Resolves the holder's Lock.
   */
  acquire(options) {
    return this.#start(options, false)
  }

  /** One attempt: the holder's Lock, or null when too few permits are free. */
  tryAcquire(options) {
    return takenAsNull(this.#start(options, true))
  }

  /**
   * Takes permits, runs `fn(signal, lock)`, always releases; resolves what
   * `fn` resolves. Rejects ERR_LOCK_LOST (with fn's result or error as
   * `cause`) if the permits were lost meanwhile, as `withLock` does.
   */
  withPermit(fn, options) {
    assertFunction(fn, 'fn')
    return this.#client[kWithLock](this.#start(options, false), fn)
  }

  /**
   * Permits held now by holders whose lease has not ended (as a quorum counts
   * them: on several nodes, the holders that at least a quorum of nodes record).
   */
  count() {
    return this.inspect().then((c) => c.permits)
  }

  /** `{ permits, holders, limit }`: what is held now, as a quorum of nodes counts it. */
  inspect() {
    return this.#client[kNative].countPermits(this.#key).then(
      (c) => ({ permits: c.permits, holders: c.holders, limit: this.#limit }),
      (e) => {
        throw withStack(e)
      },
    )
  }
}

module.exports = { Semaphore, MAX_LIMIT }
