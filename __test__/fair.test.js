'use strict'

// fair: true: waiters in every process are served in arrival order through a
// line kept in Redis, each place leased so a departed waiter never wedges it.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { LockClient } = require('..')
const { serverAndClient, startRedis, waitFor, runWorker, scriptCalls } = require('./helpers')

let server
let redis
let client
serverAndClient({ defaults: { ttl: 5000, retryDelay: 50, retryJitter: 10 } }, (s) => ({ server, redis, client } = s))

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
    await waitFor(async () => (await redis.llen('{fair:a}:line')) === i + 1, { what: `waiter ${i} in line` })
  }
  await holder.release()
  for (let i = 0; i < 4; i++) {
    const lock = await waiting[i]
    assert.deepEqual(order, Array.from({ length: i + 1 }, (_, j) => j), 'served in arrival order')
    assert.equal(await redis.get('fair:a'), lock.token)
    await lock.release()
  }
  await waitFor(async () => (await redis.exists('{fair:a}:line')) === 0, { what: 'the line to go' })
})

test('a departed waiter\'s place expires, so the line never wedges', async () => {
  // A waiter that arrived first and crashed: its place ends in 300 ms.
  await redis.rpush('{fair:b}:line', 'f:crashed')
  await redis.set('{fair:b}:line:f:crashed', 5000, 'PX', 300)
  const c = client()
  assert.equal(await c.tryAcquire('fair:b', { fair: true }), null, 'the crashed waiter is first in line')
  const started = Date.now()
  const lock = await c.acquire('fair:b', { fair: true, waitTimeout: 3000 })
  assert.ok(Date.now() - started < 2500)
  assert.equal(await redis.llen('{fair:b}:line'), 0)
  await lock.release()
})

test('a release hands the lock straight to the next waiter, who takes it without another attempt', async () => {
  // The holder's client is warmed up first, so its release could take the fast
  // path (a connection of its own on the JS thread): a fair release must not.
  const holding = client()
  await (await holding.acquire('fair:warm')).release()
  await waitFor(async () => (await redis.client('LIST')).includes('name=lockdog-fast'), { what: 'the fast connection' })
  const holder = await holding.acquire('fair:h', { fair: true })
  // retryDelay far beyond the deadline below: only the hand-off can serve it.
  const c = client({ fair: true, retryDelay: 8000, retryJitter: 0 })
  const waiting = c.acquire('fair:h', { waitTimeout: 20000 })
  await waitFor(async () => (await redis.llen('{fair:h}:line')) === 1, { what: 'the waiter in line' })
  const [token] = await redis.lrange('{fair:h}:line', 0, 0)
  const before = await scriptCalls(redis)
  const released = performance.now()
  await holder.release()
  assert.equal(await redis.get('fair:h'), token, 'the key went to the waiter with the release')
  const lock = await waiting
  assert.ok(performance.now() - released < 4000)
  assert.equal(lock.token, token)
  // A script's first call on a connection goes as EVAL, later ones as EVALSHA.
  assert.equal(await scriptCalls(redis) - before, 1, 'one script call: the release; the waiter sent nothing')
  assert.ok(lock.remaining > 4000, `the waiter holds it for its ttl (${lock.remaining} ms left)`)
  await lock.release()
  assert.equal(await redis.exists('fair:h'), 0)
})

test('a hand-off to a waiter that stopped waiting is handed on, never left held', async () => {
  for (let round = 0; round < 5; round++) {
    const holder = await client().acquire('fair:g', { fair: true })
    const c = client({ fair: true, retryDelay: 8000, retryJitter: 0 })
    const ac = new AbortController()
    const waiting = c.acquire('fair:g', { signal: ac.signal, waitTimeout: 20000 })
    await waitFor(async () => (await redis.llen('{fair:g}:line')) === 1, { what: 'the waiter in line' })
    await holder.release()
    ac.abort()
    const lock = await waiting.catch((e) => {
      assert.equal(e.code, 'ERR_LOCK_ABORTED')
      return null
    })
    if (lock) await lock.release()
    await waitFor(async () => (await redis.exists('fair:g', '{fair:g}:line')) === 0, { what: `round ${round}: nothing left held or queued`, timeout: 2000 })
  }
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

// Semaphores and read-write locks.

const line = (key) => `{${key}}:line`
/** How many wait in a fair line (a lock's is a list, a semaphore's a sorted set). */
const queued = async (key) => ((await redis.type(line(key))) === 'list' ? redis.llen(line(key)) : redis.zcard(line(key)))
const fairClient = () => client({ fair: true })

test('a fair semaphore: a later waiter never overtakes an earlier one, even when its permits fit', async () => {
  const sem = (c) => c.semaphore('fair:s1', { limit: 3 })
  const held = await sem(client()).acquire({ permits: 2 })
  const order = []
  // Wants 2 of the 1 free permit: waits.
  const first = sem(fairClient()).acquire({ permits: 2, waitTimeout: 10000 }).then((l) => (order.push('first'), l))
  await waitFor(async () => (await redis.zcard(line('fair:s1'))) === 1, { what: 'the first waiter in line' })
  // Wants the 1 free permit: fits, but the first waiter came earlier.
  const second = sem(fairClient()).acquire({ waitTimeout: 10000 }).then((l) => (order.push('second'), l))
  await waitFor(async () => (await redis.zcard(line('fair:s1'))) === 2, { what: 'the second waiter in line' })
  assert.equal(await sem(client()).count(), 2, 'nobody overtook the first waiter')
  assert.equal(await sem(fairClient()).tryAcquire(), null, 'a single attempt does not overtake the line either')
  assert.equal(await redis.zcard(line('fair:s1')), 2, 'and takes no place')
  await held.release()
  // Now 3 permits are free: the first waiter's 2 and then the second's 1 fit.
  const both = await Promise.all([first, second])
  assert.equal(await sem(client()).count(), 3)
  await Promise.all(both.map((l) => l.release()))
  await waitFor(async () => (await redis.exists(line('fair:s1'), `${line('fair:s1')}:lease`)) === 0, { what: 'the line to go' })
})

test('a fair semaphore: permits freed wake as many waiters as fit, by release notice', async () => {
  // retryDelay far beyond the deadline below: only the release notices can wake them.
  const opts = { fair: true, retryDelay: 8000, retryJitter: 0 }
  const held = await client().semaphore('fair:s2', { limit: 3 }).acquire({ permits: 3 })
  const waiting = []
  for (let i = 0; i < 3; i++) {
    waiting.push(client(opts).semaphore('fair:s2', { limit: 3 }).acquire({ waitTimeout: 20000 }))
    await waitFor(async () => (await redis.zcard(line('fair:s2'))) === i + 1, { what: `waiter ${i} in line` })
  }
  // A waiter subscribes to release notices after its first attempt: a release
  // before that goes unheard (the retry timer covers it), so wait for all three.
  await waitFor(async () => (await redis.pubsub('NUMSUB', '__lockdog:released:fair:s2'))[1] === 3, { what: 'the subscriptions' })
  const released = performance.now()
  await held.release()
  const locks = await Promise.all(waiting)
  assert.ok(performance.now() - released < 4000, `all three woken by the release (${Math.round(performance.now() - released)} ms)`)
  await Promise.all(locks.map((l) => l.release()))
})

test('a fair read-write lock serves readers and writers in arrival order; readers at the head enter together', async () => {
  const rw = (c) => c.readWriteLock('fair:rw')
  const writer = await rw(client()).writeLock()
  const order = []
  const take = (what, write) => {
    const p = (write ? rw(fairClient()).writeLock({ waitTimeout: 10000 }) : rw(fairClient()).readLock({ waitTimeout: 10000 }))
    return p.then((l) => (order.push(what), l))
  }
  const r1 = take('r1', false)
  await waitFor(async () => (await redis.zcard(line('fair:rw'))) === 1, { what: 'r1 in line' })
  const r2 = take('r2', false)
  await waitFor(async () => (await redis.zcard(line('fair:rw'))) === 2, { what: 'r2 in line' })
  // With writer preference this writer would go before r1 and r2.
  const w = take('w', true)
  await waitFor(async () => (await redis.zcard(line('fair:rw'))) === 3, { what: 'w in line' })
  const r3 = take('r3', false)
  await waitFor(async () => (await redis.zcard(line('fair:rw'))) === 4, { what: 'r3 in line' })
  await writer.release()
  const readers = await Promise.all([r1, r2])
  assert.deepEqual(order.sort(), ['r1', 'r2'], 'both readers at the head entered; the writer and r3 behind it wait')
  assert.equal(await redis.zcard('fair:rw'), 2)
  await readers[0].release()
  await readers[1].release()
  const wl = await w
  assert.deepEqual(order.slice(2), ['w'])
  assert.equal(await redis.zcard('fair:rw'), 1, 'the writer alone')
  await wl.release()
  await (await r3).release()
  assert.deepEqual(order.slice(2), ['w', 'r3'])
})

test('a fair read-write lock across processes, in arrival order', async () => {
  const holder = await client().readWriteLock('fair:rwp').writeLock()
  const kids = []
  for (const [i, kind] of ['read', 'write', 'read'].entries()) {
    kids.push(runWorker('fair-waiter.js', [server.url, kind, 'fair:rwp', 150]))
    await waitFor(async () => (await redis.zcard(line('fair:rwp'))) === i + 1, { what: `process ${i} in line`, timeout: 10000 })
  }
  await holder.release()
  const done = await Promise.all(kids.map((k) => k.exited))
  for (const d of done) assert.equal(d.code, 0, d.stderr)
  const at = done.map((d) => d.lines.find((l) => l.acquired).at)
  // Each holds 150 ms: the writer enters after the first reader's hold, the
  // later reader after the writer's.
  assert.ok(at[1] - at[0] >= 140, `the first reader before the writer (${at})`)
  assert.ok(at[2] - at[1] >= 140, `the later reader only after the writer (${at})`)
})

test('a crashed process\'s place in a fair semaphore\'s line expires', async () => {
  const holder = await client().semaphore('fair:s3', { limit: 1 }).acquire()
  const kid = runWorker('fair-waiter.js', [server.url, 'sem', 'fair:s3', 0])
  await waitFor(async () => (await redis.zcard(line('fair:s3'))) === 1, { what: 'the process in line', timeout: 10000 })
  kid.child.kill('SIGKILL')
  await kid.exited
  const next = fairClient().semaphore('fair:s3', { limit: 1 }).acquire({ waitTimeout: 15000 })
  await waitFor(async () => (await redis.zcard(line('fair:s3'))) === 2, { what: 'the next waiter behind it' })
  await holder.release()
  const started = Date.now()
  const lock = await next
  // The place lease is at least 2 s; the crashed waiter's place went with it.
  assert.ok(Date.now() - started < 6000)
  assert.equal(await redis.zcard(line('fair:s3')), 0)
  await lock.release()
})

test('a fair waiter that times out or is aborted leaves the line at once', async () => {
  const c = fairClient()
  for (const [name, holder, wait] of [
    ['fair:l4', () => client().acquire('fair:l4'), (o) => c.acquire('fair:l4', o)],
    ['fair:s4', () => client().semaphore('fair:s4', { limit: 1 }).acquire(), (o) => c.semaphore('fair:s4', { limit: 1 }).acquire(o)],
    ['fair:rw4', () => client().readWriteLock('fair:rw4').writeLock(), (o) => c.readWriteLock('fair:rw4').readLock(o)],
  ]) {
    const held = await holder()
    await assert.rejects(wait({ waitTimeout: 300 }), { code: 'ERR_LOCK_TIMEOUT' })
    // Well before a place's lease (2 s) could end.
    await waitFor(async () => (await queued(name)) === 0, { what: `${name}: the timed-out waiter gone`, timeout: 1000 })
    const ac = new AbortController()
    const aborted = wait({ signal: ac.signal, waitTimeout: 10000 })
    await waitFor(async () => (await queued(name)) === 1, { what: `${name}: the waiter in line` })
    ac.abort()
    await assert.rejects(aborted, { code: 'ERR_LOCK_ABORTED' })
    await waitFor(async () => (await queued(name)) === 0, { what: `${name}: the aborted waiter gone`, timeout: 1000 })
    await held.release()
  }
})

test('fair semaphores and read-write locks: bad input and Redlock are refused', async () => {
  const c = client()
  assert.throws(() => c.semaphore('fair:x', { limit: 2, fair: 'yes' }), { code: 'ERR_INVALID_ARG_TYPE' })
  assert.throws(() => c.semaphore('fair:x', { limit: 2 }).acquire({ fair: 1 }), { code: 'ERR_INVALID_ARG_TYPE' })
  assert.throws(() => c.readWriteLock('fair:x', { fair: 'no' }), { code: 'ERR_INVALID_ARG_TYPE' })
  assert.throws(() => c.readWriteLock('fair:x').readLock({ fair: null }), { code: 'ERR_INVALID_ARG_TYPE' })
  assert.throws(() => c.semaphore('fair:x', { limit: 2 }).acquire({ fair: true, permits: 3 }), { code: 'ERR_OUT_OF_RANGE' })
  const other = await startRedis()
  const third = await startRedis()
  const rl = new LockClient({ nodes: [server.url, other.url, third.url] })
  try {
    assert.throws(() => rl.semaphore('fair:x', { limit: 1 }).acquire({ fair: true }), { code: 'ERR_INVALID_ARG_VALUE' })
    assert.throws(() => rl.readWriteLock('fair:x').writeLock({ fair: true }), { code: 'ERR_INVALID_ARG_VALUE' })
  } finally {
    await rl.close()
    await other.stop()
    await third.stop()
  }
})

test('a fair lock given back by its token, or adopted and released, is handed to the next waiter in line', async () => {
  for (const how of ['releaseToken', 'adopt']) {
    const key = `fair:by-token:${how}`
    const holder = await client().acquire(key, { fair: true, ttl: 10000 })
    const waiter = client({ fair: true })
    // A long retry delay: only a hand-off (or a notice) gets the waiter the lock soon.
    const waiting = waiter.acquire(key, { waitTimeout: 10000, retryDelay: 4000, retryJitter: 0 })
    await waitFor(async () => (await redis.llen(`{${key}}:line`)) === 1, { what: 'the waiter in line' })
    const other = client()
    const began = Date.now()
    if (how === 'releaseToken') {
      assert.equal((await other.releaseToken(key, holder.token)).released, true)
    } else {
      const adopted = await other.adopt(key, holder.token, { ttl: 10000 })
      assert.equal(await adopted.release(), true)
    }
    const lock = await waiting
    assert.ok(Date.now() - began < 3000, `${how}: handed on, not left to the waiter's retry timer`)
    assert.equal(await redis.get(key), lock.token)
    assert.equal(await redis.llen(`{${key}}:line`), 0, 'the line is empty')
    assert.equal(await lock.release(), true)
    assert.equal(await holder.release(), false, 'the first holder no longer holds it')
  }
})
