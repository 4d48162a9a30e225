'use strict'

// Read-write locks on lockdog's native core: any number of readers or one
// writer, with writer preference (or, with `fair`, in arrival order). Each reader and the writer is a Lock taken
// through the same acquire loop, quorum, watchdog and loss reporting as locks.

const { kAcquireWith, kWithLock, kFair, takenAsNull } = require('./internal')
const { invalidType } = require('./errors')
const { keyList, assertFunction, pick, ACQUIRE, ACQUIRE_JS } = require('./validate')

const RW = { ...ACQUIRE, fair: 'boolean' }
const RW_ACQUIRE = { ...ACQUIRE_JS, fair: 'boolean' }

/**
 * Many readers or one writer on `key`, across every process. Writer
 * preference: once a writer waits, new readers wait behind it (the readers
 * already in finish first), so a stream of readers cannot starve a writer.
 * With `fair` (the lock's or an acquisition's option, else the client's),
 * readers and writers are served in arrival order through a line kept in
 * Redis: consecutive readers at the head of the line enter together, a writer
 * alone once everyone before it is done.
 */
class ReadWriteLock {
  #client
  #key
  #defaults

  constructor(client, key, options) {
    if (typeof key !== 'string') throw invalidType('key', 'of type string', key)
    keyList(key)
    this.#client = client
    this.#key = key
    this.#defaults = pick(options, RW)
  }

  /** The lock's key (without the client's keyPrefix). */
  get key() {
    return this.#key
  }

  #start(write, options, once) {
    const opts = { ...this.#defaults, ...pick(options, RW_ACQUIRE) }
    const { signal, onLost } = opts
    const fair = opts.fair ?? this.#client[kFair]
    delete opts.signal
    delete opts.onLost
    delete opts.fair
    if (once) opts.retryCount = 0
    const native = Object.assign(Object.create(null), opts)
    return this.#client[kAcquireWith]([this.#key], native, { write, fair }, signal, onLost)
  }

  #try(write, options) {
    return takenAsNull(this.#start(write, options, true))
  }

  /** Takes a read lock (beside other readers, never beside a writer), waiting as the options allow. */
  readLock(options) {
    return this.#start(false, options, false)
  }

  /** Takes the write lock (alone), waiting as the options allow; new readers wait behind a waiting writer. */
  writeLock(options) {
    return this.#start(true, options, false)
  }

  /** One attempt at a read lock: the Lock, or null. */
  tryReadLock(options) {
    return this.#try(false, options)
  }

  /** One attempt at the write lock: the Lock, or null. */
  tryWriteLock(options) {
    return this.#try(true, options)
  }

  /** Runs `fn(signal, lock)` under a read lock, always releasing; as `withLock`. */
  withReadLock(fn, options) {
    assertFunction(fn, 'fn')
    return this.#client[kWithLock](this.readLock(options), fn)
  }

  /** Runs `fn(signal, lock)` under the write lock, always releasing; as `withLock`. */
  withWriteLock(fn, options) {
    assertFunction(fn, 'fn')
    return this.#client[kWithLock](this.writeLock(options), fn)
  }
}

module.exports = { ReadWriteLock }
