'use strict'

// locks.semaphore(key, { limit }): at most `limit` permits held at once, each
// holder a Lock with its own token and lease, renewed by the native watchdog.

const { test, before, after, describe } = require('node:test')
const assert = require('node:assert/strict')
const { LockClient, Semaphore } = require('..')
const { startRedis, inspector, waitFor, aborted } = require('./helpers')

// The watchdog never keeps Node alive; tests that wait for a renewal or a loss do.
const keepAlive = setInterval(() => {}, 1000)

async function members(redis, key) {
  return (await redis.zrange(key, 0, -1)).sort()
}

describe('one node', () => {
  let server
  let redis
  let locks
  before(async () => {
    server = await startRedis()
    redis = inspector(server)
    locks = new LockClient({ url: server.url })
  })
  after(async () => {
    clearInterval(keepAlive)
    await locks.close()
    redis.disconnect()
    await server.stop()
  })

  test('at most limit holders; a release frees a permit; count and inspect', async () => {
    const sem = locks.semaphore('sem:basic', { limit: 2, ttl: 5000 })
    assert.ok(sem instanceof Semaphore)
    assert.equal(sem.limit, 2)
    assert.equal(sem.key, 'sem:basic')
    const a = await sem.acquire()
    const b = await sem.tryAcquire()
    assert.ok(b, 'the second permit is free')
    assert.notEqual(a.token, b.token)
    assert.deepEqual(await members(redis, 'sem:basic'), [a.token, b.token].sort())
    assert.equal(await sem.tryAcquire(), null, 'no third holder')
    assert.equal(await sem.count(), 2)
    assert.deepEqual(await sem.inspect(), { permits: 2, holders: 2, limit: 2 })
    await assert.rejects(sem.acquire({ waitTimeout: 150 }), { code: 'ERR_LOCK_TIMEOUT' })
    assert.equal(await a.release(), true)
    assert.equal(await a.release(), false)
    const c = await sem.acquire({ waitTimeout: 1000 })
    assert.deepEqual(await members(redis, 'sem:basic'), [b.token, c.token].sort())
    await b.release()
    await c.release()
    assert.equal(await sem.count(), 0)
    assert.equal(await redis.zcard('sem:basic'), 0)
  })

  test('permits > 1 are taken all or nothing', async () => {
    const sem = locks.semaphore('sem:many', { limit: 3 })
    const two = await sem.acquire({ permits: 2 })
    assert.match(two.token, /^2:/)
    assert.equal(await sem.tryAcquire({ permits: 2 }), null, 'two do not fit beside two of three')
    assert.deepEqual(await members(redis, 'sem:many'), [two.token], 'a refused attempt leaves nothing behind')
    const one = await sem.acquire({ permits: 1 })
    assert.equal(await sem.count(), 3)
    assert.deepEqual(await sem.inspect(), { permits: 3, holders: 2, limit: 3 })
    await one.release()
    await two.release()
    const three = await sem.acquire({ permits: 3 })
    assert.equal(await sem.count(), 3)
    await three.release()
  })

  test('a release wakes as many waiters as it frees permits (no polling)', async () => {
    const sem = locks.semaphore('sem:wake', { limit: 2, ttl: 10000 })
    const holder = await sem.acquire({ permits: 2 })
    // Waiters whose own retry timer would only fire after 5 s: only the release notices can wake them in time.
    const slow = { retryDelay: 5000, retryJitter: 0, waitTimeout: 8000 }
    const w1 = sem.acquire(slow)
    const w2 = sem.acquire(slow)
    // Both waiters have made their first attempt and queued up.
    await waitFor(() => locks.stats().contended >= 2, { what: 'two contended attempts' })
    await new Promise((r) => setTimeout(r, 100))
    const released = performance.now()
    await holder.release()
    const [l1, l2] = await Promise.all([w1, w2])
    const took = performance.now() - released
    assert.ok(took < 2500, `both waiters got a permit ${Math.round(took)} ms after the release`)
    assert.equal(await sem.count(), 2)
    await l1.release()
    await l2.release()
  })

  test('the watchdog renews each holder\'s lease; an expired holder is reclaimed by the next acquisition', async () => {
    const sem = locks.semaphore('sem:renew', { limit: 1, ttl: 600 })
    const lock = await sem.acquire()
    const until = Date.now() + 1800
    await waitFor(() => Date.now() >= until, { timeout: 4000, what: 'three leases' })
    assert.equal(lock.held, true)
    const score = Number(await redis.zscore('sem:renew', lock.token))
    const [secs, micros] = await redis.time()
    const now = Number(secs) * 1000 + Math.floor(Number(micros) / 1000)
    assert.ok(score > now, `the lease was moved forward (score ${score}, now ${now})`)
    await lock.release()
    // A holder that crashed: its lease ends in 300 ms and nobody renews it.
    await redis.zadd('sem:renew', now + 300, 'crashed-holder')
    await redis.pexpire('sem:renew', 10000)
    const started = Date.now()
    const next = await sem.acquire({ waitTimeout: 3000 })
    assert.ok(Date.now() - started >= 150, 'it waited for the crashed holder\'s lease')
    assert.deepEqual(await members(redis, 'sem:renew'), [next.token], 'the crashed holder was removed')
    await next.release()
  })

  test('a holder whose permit is taken away is reported lost: signal, onLost, \'lost\', withPermit rejects', async () => {
    const sem = locks.semaphore('sem:lost', { limit: 2, ttl: 600 })
    const seen = []
    const onEvent = (err) => seen.push(['event', err.code])
    locks.on('lost', onEvent)
    const lock = await sem.acquire({ onLost: (err) => seen.push(['onLost', err.code]) })
    await redis.zrem('sem:lost', lock.token)
    await aborted(lock.signal)
    assert.equal(lock.signal.reason.code, 'ERR_LOCK_LOST')
    await waitFor(() => seen.length === 2, { what: 'onLost and the lost event' })
    assert.deepEqual(seen.sort(), [['event', 'ERR_LOCK_LOST'], ['onLost', 'ERR_LOCK_LOST']])
    const outcome = sem.withPermit(async (signal, held) => {
      await redis.zrem('sem:lost', held.token)
      await aborted(signal)
      return 'done'
    })
    await assert.rejects(outcome, (e) => e.code === 'ERR_LOCK_LOST' && e.cause === 'done')
    assert.equal(await sem.withPermit(async () => 42), 42)
    assert.equal(await sem.count(), 0)
    locks.off('lost', onEvent)
  })

  test('bad arguments throw synchronously with a code', () => {
    assert.throws(() => locks.semaphore('s'), { code: 'ERR_INVALID_ARG_VALUE' })
    assert.throws(() => locks.semaphore('s', { limit: 0 }), { code: 'ERR_OUT_OF_RANGE' })
    assert.throws(() => locks.semaphore('s', { limit: 1.5 }), { code: 'ERR_OUT_OF_RANGE' })
    assert.throws(() => locks.semaphore('s', { limit: 100001 }), { code: 'ERR_OUT_OF_RANGE' })
    assert.throws(() => locks.semaphore('s', { limit: '2' }), { code: 'ERR_INVALID_ARG_TYPE' })
    assert.throws(() => locks.semaphore(['a', 'b'], { limit: 2 }), { code: 'ERR_INVALID_ARG_TYPE' })
    const sem = locks.semaphore('s', { limit: 2 })
    assert.throws(() => sem.acquire({ permits: 3 }), { code: 'ERR_OUT_OF_RANGE' })
    assert.throws(() => sem.acquire({ permits: 0 }), { code: 'ERR_OUT_OF_RANGE' })
    assert.throws(() => sem.acquire({ permits: 1.5 }), { code: 'ERR_OUT_OF_RANGE' })
    assert.throws(() => sem.acquire({ permits: '1' }), { code: 'ERR_INVALID_ARG_TYPE' })
    assert.throws(() => sem.tryAcquire({ permits: NaN }), { code: 'ERR_OUT_OF_RANGE' })
    assert.throws(() => sem.withPermit('nope'), { code: 'ERR_INVALID_ARG_TYPE' })
    assert.throws(() => sem.acquire({ ttl: -1 }), { code: 'ERR_OUT_OF_RANGE' })
  })
})

describe('three nodes (Redlock)', () => {
  let servers
  let redises
  before(async () => {
    servers = await Promise.all([startRedis(), startRedis(), startRedis()])
    redises = servers.map(inspector)
  })
  after(async () => {
    redises.forEach((r) => r.disconnect())
    await Promise.all(servers.map((s) => s.stop()))
  })

  test('limit 1 runs on a quorum (a node down does not stop it); a larger limit is refused on several nodes', async () => {
    const nodes = servers.map((s) => s.url)
    const a = new LockClient({ nodes })
    const b = new LockClient({ nodes })
    try {
      // With a majority per holder, holders on different majorities could exceed a limit above 1.
      assert.throws(() => a.semaphore('sem:rl', { limit: 2 }).acquire(), { code: 'ERR_INVALID_ARG_VALUE', message: /Redlock/ })
      const semA = a.semaphore('sem:rl', { limit: 1, ttl: 3000 })
      const semB = b.semaphore('sem:rl', { limit: 1, ttl: 3000 })
      const one = await semA.acquire()
      for (const r of redises) assert.equal(await r.zcard('sem:rl'), 1)
      assert.equal(await semB.tryAcquire(), null)
      assert.equal(await semA.count(), 1)
      await servers[2].stop()
      await one.release()
      const two = await semB.acquire({ waitTimeout: 2000 })
      assert.equal(await semA.count(), 1)
      await two.release()
      assert.equal(await semA.count(), 0)
    } finally {
      await a.close()
      await b.close()
    }
  })
})

test('the fault suite\'s exact checker counts permits held side by side against the limit', () => {
  const { excess } = require('./faults/checker')
  const iv = (tok, start, end, permits) => ({ tok, k: 's', w: 1, start, end, limit: 3, permits })
  assert.deepEqual(excess([iv('a', 0, 10, 2), iv('b', 5, 15, 1), iv('c', 10, 20, 2)]), [], 'an end and a start may touch')
  const found = excess([iv('a', 0, 10, 2), iv('b', 5, 15, 1), iv('c', 9, 20, 1)])
  assert.equal(found.length, 1)
  assert.equal(found[0].held, 4)
  assert.equal(found[0].tok, 'c')
})
