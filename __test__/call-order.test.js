'use strict'

// One client's callers of one key are served in call order from the very first
// call: on a new client (no connection yet), on a warm one, with and without
// the fast path, and through the redlock drop-in.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { LockClient } = require('..')
const Redlock = require('../redlock')
const { startRedis, lockClient } = require('./helpers')

let server
before(async () => {
  server = await startRedis()
})
after(async () => {
  await server.stop()
})

const ROUNDS = 10

/** Three withLock calls for one key in the same tick; the order they ran in. */
async function threeInOneTick(client, key) {
  const order = []
  await Promise.all([1, 2, 3].map((i) => client.withLock(key, async () => {
    order.push(i)
    await new Promise((r) => setTimeout(r, 2))
  }, { ttl: 10000, waitTimeout: 20000 })))
  return order.join(',')
}

for (const [label, fastPath] of [['fast path on', undefined], ['LOCKDOG_FAST_PATH=0', '0']]) {
  test(`a new client serves three same-tick acquires in call order (${label})`, async () => {
    const orders = []
    for (let r = 0; r < ROUNDS; r++) {
      const client = lockClient(fastPath === undefined, { url: server.url })
      try {
        orders.push(await threeInOneTick(client, `order:new:${label}:${r}`))
      } finally {
        await client.close()
      }
    }
    assert.deepEqual(orders, Array(ROUNDS).fill('1,2,3'))
  })

  test(`a warm client serves three same-tick acquires in call order (${label})`, async () => {
    const client = lockClient(fastPath === undefined, { url: server.url })
    try {
      await (await client.acquire('order:warm-up')).release()
      const orders = []
      for (let r = 0; r < ROUNDS; r++) orders.push(await threeInOneTick(client, `order:warm:${label}:${r}`))
      assert.deepEqual(orders, Array(ROUNDS).fill('1,2,3'))
    } finally {
      await client.close()
    }
  })
}

test('two same-tick acquires on a new client: the first caller gets the lock first', async () => {
  for (let r = 0; r < ROUNDS; r++) {
    const client = new LockClient({ url: server.url })
    try {
      const key = `order:two:${r}`
      const first = client.acquire(key, { ttl: 10000 })
      const second = client.tryAcquire(key, { ttl: 10000 })
      const lock = await first
      assert.equal(await second, null, `round ${r}: the one-attempt caller went before the first caller`)
      await lock.release()
    } finally {
      await client.close()
    }
  }
})

test('a caller queued behind earlier ones keeps its own waitTimeout', async () => {
  const other = new LockClient({ url: server.url })
  const client = new LockClient({ url: server.url })
  try {
    const held = await other.acquire('order:bounded', { ttl: 10000 })
    const started = performance.now()
    const first = client.acquire('order:bounded', { ttl: 10000, waitTimeout: 5000 })
    const second = client.acquire('order:bounded', { ttl: 10000, waitTimeout: 300 })
    const err = await second.catch((e) => e)
    const took = performance.now() - started
    assert.equal(err.code, 'ERR_LOCK_TIMEOUT')
    assert.ok(took < 3000, `waited ${took} ms with waitTimeout 300`)
    await held.release()
    await (await first).release()
  } finally {
    await Promise.all([other.close(), client.close()])
  }
})

test('a new Redlock per round serves two same-tick `using` calls in call order', async () => {
  const orders = []
  for (let r = 0; r < ROUNDS; r++) {
    const redis = new Redis({ host: '127.0.0.1', port: server.port })
    const redlock = new Redlock([redis], { retryDelay: 50, retryJitter: 10 })
    try {
      const order = []
      await Promise.all([1, 2].map((i) => redlock.using([`order:redlock:${r}`], 2000, async () => {
        order.push(i)
        await new Promise((res) => setTimeout(res, 2))
      })))
      orders.push(order.join(','))
    } finally {
      await redlock.quit()
    }
  }
  assert.deepEqual(orders, Array(ROUNDS).fill('1,2'))
})

// One lock's operations go out in call order too: an extend called before a
// release ran first on Redis, so it resolves as Redis answered it (renewed),
// and the release that follows it deletes the key.
for (const [label, fast] of [['fast path on', true], ['LOCKDOG_FAST_PATH=0', false]]) {
  test(`an extend in flight when release is called resolves as the nodes answered it (${label})`, async () => {
    const client = lockClient(fast, { url: server.url })
    const redis = new Redis({ host: '127.0.0.1', port: server.port })
    try {
      for (let r = 0; r < ROUNDS; r++) {
        const key = `order:extend-release:${label}:${r}`
        const lock = await client.acquire(key, { ttl: 2000, autoRenew: false })
        const [extended, released] = await Promise.allSettled([lock.extend(5000), lock.release()])
        assert.deepEqual(extended, { status: 'fulfilled', value: undefined })
        assert.deepEqual(released, { status: 'fulfilled', value: true })
        assert.equal(await redis.exists(key), 0)
        assert.equal(lock.status, 'released')
        await assert.rejects(lock.extend(5000), { code: 'ERR_LOCK_LOST' })
      }
    } finally {
      redis.disconnect()
      await client.close()
    }
  })
}

test('redlock drop-in: an extend then a release in one tick both resolve, as with redlock', async () => {
  const redis = new Redis({ host: '127.0.0.1', port: server.port })
  const redlock = new Redlock([redis], { retryCount: 2, retryDelay: 50 })
  const errors = []
  redlock.on('error', (e) => errors.push(e))
  try {
    for (let r = 0; r < ROUNDS; r++) {
      const lock = await redlock.acquire([`order:redlock-extend:${r}`], 2000)
      const [extended, released] = await Promise.all([lock.extend(2000), lock.release()])
      assert.equal(extended.value, lock.value)
      assert.equal(released.attempts.length, 1)
      assert.equal(await redis.exists(`order:redlock-extend:${r}`), 0)
    }
    assert.deepEqual(errors, [])
  } finally {
    await redlock.quit()
  }
})
