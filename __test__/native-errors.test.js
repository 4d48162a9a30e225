'use strict'

// Failures are built as typed errors by the native layer itself: a LockError
// (or RangeError / TypeError for an argument's value) with its code and detail
// set, whose message is words only. The same holds when the binding is called
// directly, without the JS facade, and in a worker thread (each loads the
// addon into its own environment).

const { test, describe } = require('node:test')
const assert = require('node:assert/strict')
const { Worker } = require('node:worker_threads')
const { LockClient, LockError } = require('..')
const { withStack } = require('../lib/errors')
const binding = require('../binding.js')
const { serverAndClient, freePort } = require('./helpers')

/** A message in words: no JSON payload, no marker. */
function assertPlainMessage(err) {
  assert.equal(typeof err.message, 'string')
  assert.ok(err.message.length > 0)
  assert.doesNotMatch(err.message, /[{}]/, err.message)
  assert.doesNotMatch(err.message, /lockdog:/, err.message)
}

function assertLockError(err, code) {
  assert.ok(err instanceof LockError, `${err && err.constructor && err.constructor.name}: ${err && err.message}`)
  assert.ok(err instanceof Error)
  assert.equal(err.code, code, err.message)
  assert.equal(err.name, code === 'ERR_LOCK_ABORTED' ? 'AbortError' : 'LockError')
  assert.equal(typeof err.attempts, 'number')
  assert.ok(Array.isArray(err.nodes))
  assert.ok(err.stack.startsWith(`${err.name}: ${err.message}`), err.stack)
  assertPlainMessage(err)
}

/** What a call threw synchronously (it must throw, not return a promise). */
function thrown(call) {
  let err
  assert.throws(call, (e) => {
    err = e
    return true
  })
  return err
}

/** What a call threw synchronously or its promise rejected with. */
async function failure(call) {
  try {
    await call()
  } catch (e) {
    return e
  }
  assert.fail('expected a failure')
}

describe('native failures are typed errors', () => {
  let server
  let locks
  serverAndClient({ client: {} }, (s) => ({ server, locks } = s))

  test('a rejected acquire: ERR_LOCK_TIMEOUT and ERR_LOCK_TAKEN with key, attempts, remainingMs and nodes', async () => {
    const held = await locks.acquire('native-errors:held', { ttl: 5000 })
    try {
      const timeout = await failure(() => locks.acquire('native-errors:held', { waitTimeout: 0 }))
      assertLockError(timeout, 'ERR_LOCK_TIMEOUT')
      assert.equal(timeout.key, 'native-errors:held')
      assert.ok(timeout.attempts >= 1)
      assert.ok(timeout.remainingMs > 0 && timeout.remainingMs <= 5000, String(timeout.remainingMs))
      assert.equal(timeout.nodes.length, 1)
      assert.equal(timeout.nodes[0].answer, 'held')
      assert.equal(typeof timeout.nodes[0].node, 'string')
      assert.equal(typeof timeout.nodes[0].detail, 'string')

      const taken = await failure(() => locks.acquire('native-errors:held', { retryCount: 0 }))
      assertLockError(taken, 'ERR_LOCK_TAKEN')
      assert.equal(taken.key, 'native-errors:held')
      assert.equal(taken.attempts, 1)
      assert.ok(taken.remainingMs > 0)
      assert.deepEqual(Object.keys(taken.nodes[0]).sort(), ['answer', 'detail', 'node'])
      // Built natively, the error still points at the code that awaited it.
      const here = await locks.acquire('native-errors:held', { retryCount: 0 }).catch((e) => e)
      assert.match(here.stack, /native-errors\.test\.js/, here.stack)
    } finally {
      await held.release()
    }
  })

  test('the binding called directly rejects with the same typed errors', async () => {
    const native = new binding.NativeClient({ url: server.url })
    const holder = await native.acquire(['native-errors:direct'], { ttl: 5000 })
    try {
      const err = await failure(() => native.acquire(['native-errors:direct'], { waitTimeout: 0 }))
      assertLockError(err, 'ERR_LOCK_TIMEOUT')
      assert.equal(err.key, 'native-errors:direct')
      assert.ok(err.remainingMs > 0)
      assert.equal(err.nodes[0].answer, 'held')
      assert.equal(withStack(err), err, 'withStack returns a typed error unchanged')
    } finally {
      await binding.releaseLock(holder)
    }
    await native.close()
    const closed = await failure(() => native.acquire(['native-errors:direct'], {}))
    assertLockError(closed, 'ERR_LOCK_CLOSED')
  })

  test('a closed client: ERR_LOCK_CLOSED', async () => {
    const client = new LockClient({ url: server.url })
    await client.close()
    const err = await failure(() => client.acquire('native-errors:closed'))
    assertLockError(err, 'ERR_LOCK_CLOSED')
  })

  test('a connection failure: ERR_LOCK_CONNECTION with each node\'s answer, from every operation', async () => {
    const url = `redis://127.0.0.1:${await freePort()}`
    const facade = new LockClient({ url, connectTimeout: 500 })
    const native = new binding.NativeClient({ url, connectTimeout: 500 })
    const calls = {
      acquire: () => facade.acquire('native-errors:down', { waitTimeout: 0 }),
      'binding acquire': () => native.acquire(['native-errors:down'], { waitTimeout: 0 }),
      inspect: () => facade.inspect('native-errors:down'),
      forceRelease: () => facade.forceRelease('native-errors:down'),
      'binding inspect': () => native.inspect('native-errors:down'),
    }
    try {
      for (const [what, call] of Object.entries(calls)) {
        const err = await failure(call)
        assertLockError(err, 'ERR_LOCK_CONNECTION')
        if (!what.includes('acquire')) continue
        assert.equal(err.nodes.length, 1, what)
        assert.equal(err.nodes[0].node, url.slice('redis://'.length))
        assert.equal(err.nodes[0].answer, 'unreachable')
        assert.ok(err.nodes[0].detail.length > 0)
      }
    } finally {
      await facade.close()
      await native.close()
    }
  })

  test('an aborted acquire is named AbortError', async () => {
    const held = await locks.acquire('native-errors:abort', { ttl: 5000 })
    try {
      const controller = new AbortController()
      const pending = locks.acquire('native-errors:abort', { waitTimeout: 5000, signal: controller.signal })
      setTimeout(() => controller.abort(), 50)
      const err = await failure(() => pending)
      assertLockError(err, 'ERR_LOCK_ABORTED')
    } finally {
      await held.release()
    }
  })

  test('argument errors from the native side: RangeError / TypeError with their code, thrown synchronously', async () => {
    const native = new binding.NativeClient({ url: server.url })
    try {
      let err = thrown(() => native.acquire(['native-errors:args'], { retryCount: -2 }))
      assert.ok(err instanceof RangeError, String(err))
      assert.ok(!(err instanceof LockError))
      assert.equal(err.code, 'ERR_OUT_OF_RANGE')
      assert.match(err.message, /retryCount/)
      assertPlainMessage(err)

      const lock = await native.acquire(['native-errors:args'], { ttl: 5000 })
      err = thrown(() => binding.extendLock(lock, 0))
      assert.ok(err instanceof RangeError, String(err))
      assert.equal(err.code, 'ERR_OUT_OF_RANGE')
      assertPlainMessage(err)
      // A lock is an id: one no lock of this thread has, or not an id at all, is a typed error.
      for (const id of [lock + 1e6, 0, -1, 1.5, Number.NaN]) {
        err = thrown(() => binding.lockKey(id))
        assert.ok(err instanceof TypeError, String(err))
        assert.equal(err.code, 'ERR_INVALID_ARG_VALUE', String(id))
        assertPlainMessage(err)
      }
      assert.equal(await binding.releaseLock(lock), true)
      // Once JS let go of it, its id names nothing.
      binding.forgetLock(lock)
      assert.equal(thrown(() => binding.lockStatus(lock)).code, 'ERR_INVALID_ARG_VALUE')
    } finally {
      await native.close()
    }

    const err = thrown(() => new binding.NativeClient({ url: 'http://127.0.0.1:1' }))
    assert.ok(err instanceof TypeError, String(err))
    assert.equal(err.code, 'ERR_INVALID_ARG_VALUE')
    assertPlainMessage(err)

    // Through the facade, the same errors.
    assert.throws(() => locks.acquire('native-errors:args', { ttl: 1.5 }), (e) => e instanceof RangeError && e.code === 'ERR_OUT_OF_RANGE')
  })

  test('the one native acquire takes every kind of lock; its kind is checked synchronously', async () => {
    const native = new binding.NativeClient({ url: server.url })
    const key = 'native-errors:kind'
    try {
      for (const [kind, Class, code, name] of [
        [{ limit: 0 }, RangeError, 'ERR_OUT_OF_RANGE', /"limit"/],
        [{ limit: 2, permits: 3 }, RangeError, 'ERR_OUT_OF_RANGE', /"permits"/],
        [{ limit: 2, write: true }, TypeError, 'ERR_INVALID_ARG_VALUE', /'write'/],
        [{ permits: 1 }, TypeError, 'ERR_INVALID_ARG_VALUE', /'limit'/],
      ]) {
        const err = thrown(() => native.acquire([key], {}, null, kind))
        assert.ok(err instanceof Class, String(err))
        assert.equal(err.code, code)
        assert.match(err.message, name)
        assertPlainMessage(err)
      }
      const err = thrown(() => native.acquire([key, `${key}:b`], {}, null, { fair: true }))
      assert.equal(err.code, 'ERR_INVALID_ARG_VALUE')
      assert.match(err.message, /single key/)

      const permits = await native.acquire([`${key}:sem`], { ttl: 5000 }, null, { limit: 3, permits: 2 })
      assert.deepEqual(await native.countPermits(`${key}:sem`), { permits: 2, holders: 1 })
      const full = await failure(() => native.acquire([`${key}:sem`], { retryCount: 0 }, null, { limit: 3, permits: 2 }))
      assertLockError(full, 'ERR_LOCK_TAKEN')
      const reader = await native.acquire([`${key}:rw`], { ttl: 5000 }, null, { write: false })
      const writer = await failure(() => native.acquire([`${key}:rw`], { retryCount: 0 }, null, { write: true }))
      assertLockError(writer, 'ERR_LOCK_TAKEN')
      const fair = await native.acquire([`${key}:fair`], { ttl: 5000 }, null, { fair: true })
      for (const lock of [permits, reader, fair]) assert.equal(await binding.releaseLock(lock), true)
    } finally {
      await native.close()
    }
  })

  test('in a worker thread, the worker\'s own LockError class', async () => {
    const worker = new Worker(`
      const { parentPort, workerData } = require('node:worker_threads')
      const { LockClient, LockError } = require(workerData.root)
      const binding = require(workerData.root + '/binding.js')
      const seen = {}
      const describe = (e) => ({ lockError: e instanceof LockError, range: e instanceof RangeError, name: e.name, code: e.code, message: e.message, key: e.key, nodes: e.nodes })
      ;(async () => {
        const locks = new LockClient({ url: workerData.url })
        const held = await locks.acquire('native-errors:worker', { ttl: 5000 })
        seen.timeout = await locks.acquire('native-errors:worker', { waitTimeout: 0 }).catch(describe)
        const native = new binding.NativeClient({ url: workerData.url })
        seen.direct = await native.acquire(['native-errors:worker'], { waitTimeout: 0 }).catch(describe)
        try { native.acquire(['native-errors:worker'], { retryDelay: -1 }) } catch (e) { seen.range = describe(e) }
        await native.close()
        seen.closed = await Promise.resolve().then(() => native.acquire(['native-errors:worker'], {})).catch(describe)
        await held.release()
        await locks.close()
        parentPort.postMessage(seen)
      })().catch((e) => parentPort.postMessage({ failed: String(e && e.stack) }))
    `, { eval: true, workerData: { root: require('node:path').join(__dirname, '..'), url: server.url } })
    const seen = await new Promise((resolve, reject) => {
      worker.once('message', resolve)
      worker.once('error', reject)
    })
    await worker.terminate()
    assert.equal(seen.failed, undefined, seen.failed)
    for (const [what, code] of [['timeout', 'ERR_LOCK_TIMEOUT'], ['direct', 'ERR_LOCK_TIMEOUT'], ['closed', 'ERR_LOCK_CLOSED']]) {
      const e = seen[what]
      assert.equal(e.lockError, true, `${what}: ${e.message}`)
      assert.equal(e.code, code)
      assert.equal(e.name, 'LockError')
      assertPlainMessage(e)
    }
    assert.equal(seen.timeout.key, 'native-errors:worker')
    assert.equal(seen.direct.nodes[0].answer, 'held')
    assert.equal(seen.range.range, true)
    assert.equal(seen.range.lockError, false)
    assert.equal(seen.range.code, 'ERR_OUT_OF_RANGE')
    assertPlainMessage(seen.range)
  })
})

test('withStack returns the error it is given, adding a stack only where there are no frames', () => {
  const plain = new Error('plain')
  const stack = plain.stack
  assert.equal(withStack(plain), plain)
  assert.equal(plain.stack, stack)
  const typed = new LockError('ERR_LOCK_LOST', 'lost', { key: 'k' })
  assert.equal(withStack(typed), typed)
  assert.equal(withStack(undefined), undefined)
})
