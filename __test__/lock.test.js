'use strict'

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { LockClient, LockError } = require('..')
const { serverAndClient, waitFor } = require('./helpers')

let server
let redis
let locks

serverAndClient({ client: { ttl: 2000 } }, (s) => ({ server, redis, locks } = s))

test('acquire stores a fresh UUID token with a TTL; release deletes it', async () => {
  const lock = await locks.acquire('basic:a')
  assert.match(lock.token, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  assert.equal(await redis.get('basic:a'), lock.token)
  const pttl = await redis.pttl('basic:a')
  assert.ok(pttl > 0 && pttl <= 2000, `pttl ${pttl}`)
  assert.equal(lock.key, 'basic:a')
  assert.equal(lock.held, true)
  assert.ok(lock.remaining > 1500 && lock.remaining < 2000, `remaining ${lock.remaining}`)
  const second = await locks.acquire('basic:b')
  assert.notEqual(second.token, lock.token)
  assert.equal(await lock.release(), true)
  assert.equal(await redis.exists('basic:a'), 0)
  assert.equal(lock.held, false)
  assert.equal(lock.remaining, 0)
  assert.equal(lock.status, 'released')
  assert.equal(await lock.release(), false, 'a second release resolves false')
  await second.release()
})

test('tryAcquire makes one attempt and resolves null when held', async () => {
  const lock = await locks.acquire('basic:try')
  const t0 = performance.now()
  assert.equal(await locks.tryAcquire('basic:try'), null)
  assert.ok(performance.now() - t0 < 500)
  await lock.release()
  const again = await locks.tryAcquire('basic:try')
  assert.ok(again)
  await again.release()
})

test('a token-checked release cannot delete another holder\'s lock', async () => {
  const lock = await locks.acquire('basic:foreign')
  await redis.set('basic:foreign', 'someone-else', 'PX', 5000)
  assert.equal(await lock.release(), false)
  assert.equal(await redis.get('basic:foreign'), 'someone-else')
  await redis.del('basic:foreign')
})

test('extend re-arms the TTL with the same token and never resurrects a deleted key', async () => {
  const lock = await locks.acquire('basic:extend', { autoRenew: false, ttl: 1000 })
  await lock.extend(5000)
  const pttl = await redis.pttl('basic:extend')
  assert.ok(pttl > 4000, `pttl after extend ${pttl}`)
  assert.equal(await redis.get('basic:extend'), lock.token)
  assert.ok(lock.remaining > 4000)
  await redis.del('basic:extend')
  await assert.rejects(lock.extend(5000), (e) => e instanceof LockError && e.code === 'ERR_LOCK_LOST')
  assert.equal(await redis.exists('basic:extend'), 0, 'extend must not recreate the key')
  assert.equal(lock.status, 'lost')
  await assert.rejects(lock.extend(1000), { code: 'ERR_LOCK_LOST' })
  assert.equal(await lock.release(), false)
})

test('extend after release rejects ERR_LOCK_LOST', async () => {
  const lock = await locks.acquire('basic:extend2')
  await lock.release()
  await assert.rejects(lock.extend(1000), { code: 'ERR_LOCK_LOST' })
})

test('contention: acquire waits for the holder and then gets the lock', async () => {
  const first = await locks.acquire('basic:wait')
  const waiting = locks.acquire('basic:wait', { retryDelay: 20, retryJitter: 10, waitTimeout: 5000 })
  setTimeout(() => first.release(), 150)
  const second = await waiting
  assert.ok(second.attempts > 1, `attempts ${second.attempts}`)
  assert.equal(await redis.get('basic:wait'), second.token)
  await second.release()
})

test('a release wakes the waiters of another client in arrival order, long before their retry timer', async () => {
  const other = new LockClient({ url: server.url })
  try {
    const first = await locks.acquire('basic:handoff')
    // Retry timers far beyond the test: only the release notice can end these waits.
    const patient = { retryDelay: 60_000, retryJitter: 0, waitTimeout: 120_000 }
    const order = []
    const waits = []
    for (let i = 0; i < 3; i++) {
      waits.push(other.acquire('basic:handoff', patient).then(async (lock) => {
        order.push(i)
        assert.equal(await redis.get('basic:handoff'), lock.token)
        await lock.release()
      }))
      // The first waiter finds the key held and queues; the later callers of
      // the same client queue behind it without an attempt of their own.
      if (i === 0) await waitFor(() => other.stats().contended === 1, { what: 'waiter 0 to queue up' })
    }
    await waitFor(async () => (await redis.pubsub('NUMSUB', '__lockdog:released:basic:handoff'))[1] === 1, { what: 'the subscription' })
    assert.equal(await first.release(), true)
    await Promise.all(waits)
    assert.deepEqual(order, [0, 1, 2])
    assert.equal(other.stats().woken, 3)
  } finally {
    await other.close()
  }
})

test('ERR_LOCK_TAKEN after retryCount, ERR_LOCK_TIMEOUT after waitTimeout, with the holder\'s remaining time', async () => {
  const holder = await locks.acquire('basic:taken', { ttl: 5000 })
  await assert.rejects(locks.acquire('basic:taken', { retryCount: 2, retryDelay: 10, retryJitter: 0 }), (e) => {
    assert.equal(e.code, 'ERR_LOCK_TAKEN')
    assert.equal(e.attempts, 3)
    assert.equal(e.key, 'basic:taken')
    assert.ok(e.remainingMs > 3000 && e.remainingMs <= 5000, `remainingMs ${e.remainingMs}`)
    return true
  })
  const t0 = performance.now()
  await assert.rejects(locks.acquire('basic:taken', { waitTimeout: 200, retryDelay: 30 }), (e) => {
    assert.equal(e.code, 'ERR_LOCK_TIMEOUT')
    assert.ok(e.remainingMs > 0)
    return true
  })
  assert.ok(performance.now() - t0 >= 190)
  assert.equal(await redis.get('basic:taken'), holder.token, 'the holder keeps its lock')
  await holder.release()
})

test('keyPrefix is applied in Redis but not in lock.key', async () => {
  const prefixed = new LockClient({ url: server.url, keyPrefix: 'lock:' })
  const lock = await prefixed.acquire('order:1')
  assert.equal(lock.key, 'order:1')
  assert.equal(await redis.get('lock:order:1'), lock.token)
  await prefixed.close()
  assert.equal(await redis.exists('lock:order:1'), 0, 'close releases held locks')
  assert.equal(lock.status, 'released')
})

test('multi-key locks are all or nothing', async () => {
  const other = await locks.acquire('multi:b')
  await assert.rejects(locks.acquire(['multi:a', 'multi:b', 'multi:c'], { retryCount: 0 }), { code: 'ERR_LOCK_TAKEN' })
  assert.equal(await redis.exists('multi:a'), 0)
  assert.equal(await redis.exists('multi:c'), 0)
  await other.release()
  const lock = await locks.acquire(['multi:a', 'multi:b', 'multi:c'])
  assert.deepEqual(lock.keys, ['multi:a', 'multi:b', 'multi:c'])
  for (const k of lock.keys) assert.equal(await redis.get(k), lock.token)
  assert.equal(await lock.release(), true)
  assert.equal(await redis.exists('multi:a', 'multi:b', 'multi:c'), 0)
})

test('withLock returns fn\'s value, passes (signal, lock) and always releases', async () => {
  let seen
  const out = await locks.withLock('with:a', async (signal, lock) => {
    seen = lock
    assert.ok(signal instanceof AbortSignal)
    assert.equal(signal.aborted, false)
    assert.equal(await redis.get('with:a'), lock.token)
    return { ok: 42 }
  })
  assert.deepEqual(out, { ok: 42 })
  assert.equal(seen.status, 'released')
  assert.equal(await redis.exists('with:a'), 0)
  const boom = new Error('boom')
  await assert.rejects(locks.withLock('with:a', () => { throw boom }), (e) => e === boom)
  assert.equal(await redis.exists('with:a'), 0)
  assert.equal(await locks.withLock('with:a', () => 7), 7, 'a non-Promise result works')
})

test('every call on a closed client rejects ERR_LOCK_CLOSED', async () => {
  const c = new LockClient({ url: server.url })
  const lock = await c.acquire('closed:a')
  await c.close()
  assert.equal(c.closed, true)
  await assert.rejects(c.acquire('closed:b'), { code: 'ERR_LOCK_CLOSED' })
  await assert.rejects(c.tryAcquire('closed:b'), { code: 'ERR_LOCK_CLOSED' })
  await assert.rejects(c.withLock('closed:b', () => 1), { code: 'ERR_LOCK_CLOSED' })
  await assert.rejects(lock.extend(1000), { code: 'ERR_LOCK_CLOSED' })
  await assert.rejects(c.acquire(['closed:b', 'closed:c']), { code: 'ERR_LOCK_CLOSED', key: 'closed:b, closed:c' })
  await assert.rejects(c.adopt('closed:b', 'some-token'), { code: 'ERR_LOCK_CLOSED' })
  // The lock the close ended says so, and it is no loss.
  assert.equal(lock.status, 'released')
  assert.equal(lock.signal.reason.code, 'ERR_LOCK_CLOSED')
  assert.match(lock.signal.reason.message, /lock "closed:a" was ended: its client was closed while it was held/)
  assert.equal(lock.lossError, null)
  assert.throws(() => lock.handOver(), (e) => e.code === 'ERR_LOCK_LOST' && /its client was closed/.test(e.message))
  assert.equal(await lock.release(), false)
  await c.close()
})

test('while close({ graceful }) waits, held locks can be extended and a waiting acquire ends at once', async () => {
  const c = new LockClient({ url: server.url })
  const other = new LockClient({ url: server.url })
  try {
    const blocker = await other.acquire('graceful:b')
    let held
    let release
    const running = c.withLock('graceful:a', async (signal, lock) => {
      held = lock
      await new Promise((r) => { release = r })
      return signal.aborted
    })
    await waitFor(() => held, { what: 'withLock to run' })
    const waiting = c.acquire('graceful:b', { waitTimeout: 20000 }).catch((e) => e)
    const t0 = performance.now()
    const closing = c.close({ graceful: 20000 })
    assert.equal(c.closed, true)
    const err = await waiting
    assert.equal(err.code, 'ERR_LOCK_CLOSED', String(err))
    assert.ok(performance.now() - t0 < 5000, 'the waiting acquire did not wait for the graceful bound')
    await held.extend(5000)
    assert.ok(await redis.pttl('graceful:a') > 4000, 'extended during the graceful wait')
    release()
    assert.equal(await running, false, 'finished within the bound: never aborted')
    await closing
    assert.equal(await redis.exists('graceful:a'), 0)
    await blocker.release()
  } finally {
    await c.close()
    await other.close()
  }
})

test('stats count what happened', async () => {
  const c = new LockClient({ url: server.url })
  const a = await c.acquire('stats:a')
  assert.equal(await c.tryAcquire('stats:a'), null)
  await a.release()
  const s = c.stats()
  assert.equal(s.acquired, 1)
  assert.equal(s.contended, 1)
  assert.equal(s.released, 1)
  assert.equal(s.held, 0)
  await c.close()
})

test('minValidity refuses a lock that would come back with too little validity; waitTimeout may be Infinity', async () => {
  await assert.rejects(locks.acquire('basic:minvalid', { ttl: 100, minValidity: 99 }), { code: 'ERR_LOCK_TIMEOUT' })
  // The undo goes on in the background: the rejection does not wait for it.
  await waitFor(async () => (await redis.exists('basic:minvalid')) === 0, { what: 'the refused attempt was undone' })
  const lock = await locks.acquire('basic:minvalid', { ttl: 1000, minValidity: 500, waitTimeout: Infinity })
  assert.ok(lock.remaining >= 500)
  await lock.release()
  assert.throws(() => locks.acquire('basic:minvalid', { minValidity: 0 }), { code: 'ERR_OUT_OF_RANGE' })
})
