'use strict'

// fair: true: waiters in every process are served in arrival order through a
// line kept in Redis, each place leased so a departed waiter never wedges it.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { LockClient } = require('..')
const { startRedis, inspector, waitFor } = require('./helpers')

let server
let redis
const clients = []
const client = (o = {}) => {
  const c = new LockClient({ url: server.url, ttl: 5000, retryDelay: 50, retryJitter: 10, ...o })
  clients.push(c)
  return c
}

before(async () => {
  server = await startRedis()
  redis = inspector(server)
})
after(async () => {
  await Promise.all(clients.map((c) => c.close()))
  redis.disconnect()
  await server.stop()
})

test('waiters of different clients are served in the order they arrived', async () => {
  const holder = await client().acquire('fair:a', { fair: true })
  const order = []
  const waiting = []
  for (let i = 0; i < 4; i++) {
    const c = client({ fair: true })
    waiting.push(c.acquire('fair:a', { waitTimeout: 10000 }).then((l) => {
      order.push(i)
      return l
    }))
    // The next waiter arrives only once this one has its place in line.
    await waitFor(async () => (await redis.zcard('{fair:a}:line')) === i + 1, { what: `waiter ${i} in line` })
  }
  await holder.release()
  for (let i = 0; i < 4; i++) {
    const lock = await waiting[i]
    assert.deepEqual(order, Array.from({ length: i + 1 }, (_, j) => j), 'served in arrival order')
    assert.equal(await redis.get('fair:a'), lock.token)
    await lock.release()
  }
  await waitFor(async () => (await redis.exists('{fair:a}:line', '{fair:a}:line:lease')) === 0, { what: 'the line to expire' })
})

test('a departed waiter\'s place expires, so the line never wedges', async () => {
  const [secs, micros] = await redis.time()
  const now = Number(secs) * 1000 + Math.floor(Number(micros) / 1000)
  // A waiter that arrived first and crashed: its place ends in 300 ms.
  await redis.zadd('{fair:b}:line', now - 1000, 'crashed')
  await redis.zadd('{fair:b}:line:lease', now + 300, 'crashed')
  const c = client()
  assert.equal(await c.tryAcquire('fair:b', { fair: true }), null, 'the crashed waiter is first in line')
  const started = Date.now()
  const lock = await c.acquire('fair:b', { fair: true, waitTimeout: 3000 })
  assert.ok(Date.now() - started < 2500)
  assert.equal(await redis.zscore('{fair:b}:line', 'crashed'), null)
  await lock.release()
})

test('withLock honours the client\'s fair option; bad combinations are refused', async () => {
  const c = client({ fair: true })
  assert.equal(await c.withLock('fair:c', async () => 'ok'), 'ok')
  assert.throws(() => c.acquire(['fair:x', 'fair:y']), { code: 'ERR_INVALID_ARG_VALUE' })
  assert.throws(() => c.acquire('fair:x', { fair: 'yes' }), { code: 'ERR_INVALID_ARG_TYPE' })
  assert.throws(() => new LockClient({ url: server.url, fair: 1 }), { code: 'ERR_INVALID_ARG_TYPE' })
  const other = await startRedis()
  const third = await startRedis()
  const rl = new LockClient({ nodes: [server.url, other.url, third.url] })
  try {
    assert.throws(() => rl.acquire('fair:x', { fair: true }), { code: 'ERR_INVALID_ARG_VALUE' })
  } finally {
    await rl.close()
    await other.stop()
    await third.stop()
  }
})
