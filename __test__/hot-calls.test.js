'use strict'

// The JS thread's own acquire and release (`hotCalls()`): plain Node-API
// functions for the two calls of every lock's life, without napi-rs's
// per-call glue. lib/ takes a lock on one key by them when its client is on
// the JS-loop driver, and gives every lock back by them; what they are
// given is checked like `NativeClient.acquire`'s arguments (a typed error,
// never a crash), and a client's acquires that pass the same options
// resolve them once without mixing up different ones.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis, lockClient } = require('./helpers')
const binding = require('../binding.js')
const { hot, kNative } = require('../lib/internal')

let server

before(async () => {
  server = await startRedis()
})

after(async () => {
  await server.stop()
})

/** Counts lib's calls of `hot.acquire` and `hot.release` while `step` runs. */
async function hotCallsOf(step) {
  const counts = { acquire: 0, release: 0 }
  const saved = { ...hot }
  for (const name of Object.keys(counts)) {
    hot[name] = (...args) => {
      counts[name]++
      return saved[name](...args)
    }
  }
  try {
    await step()
  } finally {
    Object.assign(hot, saved)
  }
  return counts
}

test('a lock on one key on the JS-loop driver is taken and given back by the hot calls', async (t) => {
  const locks = lockClient(true, { url: server.url })
  t.after(() => locks.close())
  assert.equal(locks.fastPath, true)
  const counts = await hotCallsOf(async () => {
    const lock = await locks.acquire('hot:one', { ttl: 5000 })
    assert.equal(lock.held, true)
    assert.equal(await lock.release(), true)
  })
  assert.deepEqual(counts, { acquire: 1, release: 1 })
})

test('several keys, a signal or another kind go the general way; the release is the same', async (t) => {
  const locks = lockClient(true, { url: server.url })
  t.after(() => locks.close())
  const counts = await hotCallsOf(async () => {
    await (await locks.acquire(['hot:a', 'hot:b'])).release()
    await (await locks.acquire('hot:c', { signal: new AbortController().signal })).release()
    await (await locks.acquire('hot:d', { fair: true })).release()
  })
  assert.deepEqual(counts, { acquire: 0, release: 3 })
})

test('the tokio driver has no hot acquire; its locks are given back by the hot release', async (t) => {
  const locks = lockClient(false, { url: server.url })
  t.after(() => locks.close())
  const counts = await hotCallsOf(async () => {
    const lock = await locks.acquire('hot:tokio', { ttl: 5000 })
    assert.equal(lock.ttl, 5000)
    assert.equal(await lock.release(), true)
  })
  assert.deepEqual(counts, { acquire: 0, release: 1 })
})

test('options resolved once per client are never another call\'s', async (t) => {
  const locks = lockClient(true, { url: server.url, ttl: 20000 })
  t.after(() => locks.close())
  const seen = []
  for (const options of [{ ttl: 5000 }, { ttl: 5000 }, { ttl: 7000 }, undefined, { ttl: 5000, autoRenew: false }, { ttl: 5000 }, {}]) {
    const lock = await locks.acquire('hot:options', options)
    seen.push(lock.ttl)
    await lock.release()
  }
  assert.deepEqual(seen, [5000, 5000, 7000, 20000, 5000, 5000, 20000])
  // Options that differ past the ttl: each call waits as its own say.
  const holder = await locks.acquire('hot:held', { ttl: 10000 })
  const attempts = async (options) => {
    const e = await locks.acquire('hot:held', options).then(() => null, (err) => err)
    assert.equal(e?.code, 'ERR_LOCK_TAKEN')
    return e.attempts
  }
  assert.deepEqual(
    [
      await attempts({ ttl: 5000, retryCount: 0 }),
      await attempts({ ttl: 5000, retryCount: 2, retryDelay: 5, retryJitter: 0 }),
      await attempts({ ttl: 5000, retryCount: 0 }),
    ],
    [1, 3, 1],
  )
  await holder.release()
  // A bad option still fails, after good ones were resolved, and good ones still work after it.
  // (Bad arguments throw synchronously.)
  assert.throws(() => locks.acquire('hot:options', { ttl: 5000, renewInterval: 6000 }), { code: 'ERR_OUT_OF_RANGE' })
  assert.throws(() => locks.acquire('hot:options', { ttl: 0 }), { code: 'ERR_OUT_OF_RANGE' })
  const lock = await locks.acquire('hot:options', { ttl: 5000 })
  assert.equal(lock.ttl, 5000)
  await lock.release()
})

test('the hot calls check what they are given: typed errors, never a crash', async (t) => {
  const locks = lockClient(true, { url: server.url })
  t.after(() => locks.close())
  const calls = binding.hotCalls()
  const valid = locks[kNative].hotKey
  assert.ok(Number.isInteger(valid), 'the client has a hot key')
  const cases = [
    [],
    [undefined, 'k'],
    ['1', 'k'],
    [NaN, 'k'],
    [-1, 'k'],
    [1.5, 'k'],
    [2 ** 60, 'k'],
    [0, 'k'],
    [valid, 42],
    [valid, ''],
    [valid, 'k'.repeat(600 * 1024)],
    [valid, 'k', {}],
    [valid, 'k', [1, 2]],
    [valid, 'k', new Int32Array(12)],
    [valid, 'k', new Float64Array(3)],
    [valid, 'k', new Float64Array(0)],
    [valid, 'k', Float64Array.of(4096, ...new Array(11).fill(0))],
    [valid, 'k', Float64Array.of(1, -5, ...new Array(10).fill(0))],
  ]
  for (const args of cases) {
    let failure
    try {
      const lock = await calls.acquire(...args)
      failure = new Error(`resolved ${lock}`)
    } catch (e) {
      failure = e
    }
    assert.match(failure.code ?? '', /^ERR_(INVALID_ARG_VALUE|INVALID_ARG_TYPE|OUT_OF_RANGE)$/, `${String(args).slice(0, 40)}: ${failure.message}`)
  }
  for (const id of [undefined, 'x', NaN, -1, 1.5, 2 ** 60, 123456789]) {
    await assert.rejects(async () => calls.release(id), (e) => /^ERR_INVALID_ARG_(VALUE|TYPE)$/.test(e.code))
  }
})

test('after close(), an acquire rejects ERR_LOCK_CLOSED', async () => {
  const locks = lockClient(true, { url: server.url })
  await (await locks.acquire('hot:closing')).release()
  await locks.close()
  await assert.rejects(locks.acquire('hot:closing'), { code: 'ERR_LOCK_CLOSED' })
})
