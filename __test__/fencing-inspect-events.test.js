'use strict'

const { test, before } = require('node:test')
const assert = require('node:assert/strict')
const diagnostics = require('node:diagnostics_channel')
const { LockClient } = require('..')
const { serverAndClient, startRedis, inspector, waitFor, lockClient, scriptCalls } = require('./helpers')

let server
let redis

serverAndClient({}, (s) => ({ server, redis } = s))

test('fencing tokens grow with every holder of a key and live beside it in Redis', async () => {
  const locks = new LockClient({ url: server.url, fencing: true, keyPrefix: 'app:' })
  const fences = []
  for (let i = 0; i < 3; i++) {
    const lock = await locks.acquire('fenced')
    fences.push(lock.fence)
    await lock.release()
  }
  // A new counter starts from the server's clock in µs, then counts up by one.
  assert.deepEqual(fences, [fences[0], fences[0] + 1, fences[0] + 2])
  assert.ok(Math.abs(fences[0] - Date.now() * 1000) < 600e6, `the first fence ${fences[0]} is the clock in µs`)
  assert.ok(Number.isSafeInteger(fences[2]))
  assert.equal(await redis.get('{app:fenced}:fence'), String(fences[2]))
  const plain = new LockClient({ url: server.url })
  const lock = await plain.acquire('unfenced')
  assert.equal(lock.fence, null, 'fencing is opt-in')
  assert.equal(await redis.exists('{unfenced}:fence'), 0)
  await lock.release()
  await plain.close()
  await locks.close()
})

test('fences stay monotonic across a restart of the server that lost the counter', async () => {
  const own = await startRedis()
  const a = new LockClient({ url: own.url, fencing: true })
  const b = new LockClient({ url: own.url, fencing: true })
  // a's lock is lost with the restart: told, and not an error of this test.
  const lost = []
  a.on('lost', (e) => lost.push(e.code))
  a.on('error', () => {})
  b.on('error', () => {})
  try {
    let first
    for (let i = 0; i < 3; i++) {
      if (first) await first.release()
      first = await a.acquire('restarted', { ttl: 3000 })
    }
    // No persistence: the key and its fence counter go with the restart.
    await own.restart()
    const second = await waitFor(() => b.acquire('restarted').catch(() => null), { timeout: 10000, what: 'the second holder to take the lock' })
    assert.ok(second.fence > first.fence, `the holder after the restart has fence ${second.fence}, not above ${first.fence}`)
    await second.release()
    await waitFor(() => lost.length > 0, { timeout: 10000, what: 'the first holder to hear its loss' })
    assert.deepEqual(lost, ['ERR_LOCK_LOST'])
  } finally {
    await a.close()
    await b.close()
    await own.stop()
  }
})

test('a stale holder is refused by a resource that checks the fence', async () => {
  const locks = new LockClient({ url: server.url, fencing: true })
  // The protected resource: a write script that refuses fences older than the newest seen.
  const write = async (value, fence) => redis.eval(
    "local seen = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0') " +
    "if tonumber(ARGV[2]) < seen then return 0 end " +
    "redis.call('HSET', KEYS[1], 'value', ARGV[1], 'fence', ARGV[2]) return 1",
    1, 'resource', value, fence)
  const first = await locks.acquire('res', { ttl: 300, autoRenew: false })
  await waitFor(() => !first.held, { what: 'the first lease to run out' })
  const second = await locks.acquire('res')
  assert.equal(await write('from second', second.fence), 1)
  assert.equal(await write('from the stale first', first.fence), 0, 'the stale holder is fenced off')
  assert.equal(await redis.hget('resource', 'value'), 'from second')
  await second.release()
  await locks.close()
})

test('inspect shows holder, remaining TTL and fence; forceRelease removes any holder', async () => {
  const locks = new LockClient({ url: server.url, fencing: true })
  const free = await locks.inspect('insp')
  assert.deepEqual(free, { held: false, remainingMs: null, holder: null, fence: null })
  const lock = await locks.acquire('insp', { ttl: 5000 })
  const seen = await locks.inspect('insp')
  assert.equal(seen.held, true)
  assert.ok(seen.remainingMs > 4000 && seen.remainingMs <= 5000)
  assert.equal(seen.holder, `${lock.token.slice(0, 8)}…`)
  assert.equal(seen.fence, lock.fence)
  assert.ok(!JSON.stringify(seen).includes(lock.token), 'the full token is never shown')
  assert.equal(await locks.forceRelease('insp'), 1)
  assert.equal(await redis.exists('insp'), 0)
  assert.equal(await locks.forceRelease('insp'), 0)
  await waitFor(() => lock.status === 'lost', { what: 'the holder to learn of the loss' })
  assert.throws(() => locks.inspect(''), { code: 'ERR_INVALID_ARG_VALUE' })
  assert.throws(() => locks.forceRelease(['a']), { code: 'ERR_INVALID_ARG_TYPE' })
  await locks.close()
  await assert.rejects(locks.inspect('insp'), { code: 'ERR_LOCK_CLOSED' })
})

test('diagnostics_channel publishes acquire, renew, release and loss', async () => {
  const seen = { acquire: [], renew: [], release: [], lost: [] }
  const handlers = {}
  for (const name of Object.keys(seen)) {
    handlers[name] = (msg) => seen[name].push(msg)
    diagnostics.subscribe(`lockdog:${name}`, handlers[name])
  }
  try {
    const locks = new LockClient({ url: server.url })
    const lock = await locks.acquire('traced', { ttl: 300 })
    await waitFor(() => seen.renew.length >= 2, { what: 'renewal publications' })
    await lock.release()
    const doomed = await locks.acquire('traced2', { ttl: 300 })
    await redis.del('traced2')
    await waitFor(() => seen.lost.length === 1, { what: 'loss publication' })
    assert.equal(seen.acquire[0].key, 'traced')
    assert.equal(seen.acquire[0].token, lock.token)
    assert.ok(seen.renew[0].count >= 1)
    assert.deepEqual(seen.release.map((r) => [r.key, r.released]), [['traced', true]])
    assert.equal(seen.lost[0].key, 'traced2')
    assert.equal(seen.lost[0].error.code, 'ERR_LOCK_LOST')
    assert.equal(seen.lost[0].lock, doomed)
    await locks.close()
  } finally {
    for (const name of Object.keys(seen)) diagnostics.unsubscribe(`lockdog:${name}`, handlers[name])
  }
})

test('waitReplicas: the acquisition and extensions wait for the replica; lock.replicas says how many acknowledged', async () => {
  // A full sync otherwise waits 5 s for more replicas (repl-diskless-sync-delay).
  await redis.config('SET', 'repl-diskless-sync-delay', '0')
  const replica = await startRedis(['--replicaof', '127.0.0.1', String(server.port)])
  const onReplica = inspector(replica)
  const locks = new LockClient({ url: server.url, waitReplicas: 1, waitReplicasTimeout: 2000 })
  try {
    await waitFor(async () => /master_link_status:up/.test(await onReplica.info('replication')), { what: 'the replica to sync', timeout: 30_000 })
    const lock = await locks.acquire('replicated')
    assert.equal(lock.replicas, 1)
    assert.equal(await onReplica.get('replicated'), lock.token, 'WAIT returned: the replica has the key')
    await lock.extend(20_000)
    assert.equal(lock.replicas, 1)
    assert.equal(await lock.release(), true)
    const plain = await locks.acquire('plain', { waitReplicas: 0 })
    assert.equal(plain.replicas, null)
    await plain.release()
    // Bad options throw at the call, before anything is sent.
    assert.throws(() => locks.acquire('x', { waitReplicas: 1.5 }), { code: 'ERR_OUT_OF_RANGE' })
    assert.throws(() => locks.acquire('x', { ttl: 1000, waitReplicasTimeout: 1000 }), { code: 'ERR_OUT_OF_RANGE' })
    assert.throws(() => new LockClient({ nodes: [server.url, replica.url], waitReplicas: 1 }), { code: 'ERR_INVALID_ARG_VALUE' })
    assert.throws(() => locks.acquire('x', { waitReplicas: '1' }), { code: 'ERR_INVALID_ARG_TYPE' })
  } finally {
    await locks.close()
    onReplica.disconnect()
    await replica.stop()
  }
})

// Fair locks: the fence counter goes up wherever the key changes hands.

const fs = require('node:fs')
const path = require('node:path')
const lua = (name) => fs.readFileSync(path.join(__dirname, '..', 'src', 'scripts', `${name}.lua`), 'utf8')
// A script that hands out fences goes with the fence counter's function, as the addon sends it.
const script = (name) => (/next_fence\(/.test(lua(name)) ? lua('fence') + lua(name) : lua(name))

for (const [label, fastPath] of [['fast path on', undefined], ['LOCKDOG_FAST_PATH=0', '0']]) {
  test(`fair locks get fences that grow with every holder: taken, handed over, announced or not (${label})`, async () => {
    const key = `fairfence:${fastPath ?? 'fast'}`
    const opts = { fair: true, ttl: 5000 }
    // retryDelay far beyond the waits below: only a hand-off can serve the waiter in time.
    const make = (o = {}) => lockClient(fastPath === undefined, { url: server.url, fencing: true, retryDelay: 8000, retryJitter: 0, ...o })
    const a = await make()
    const b = await make()
    const unfenced = await make({ fencing: false })
    const published = []
    const onAcquire = (msg) => published.push(msg)
    diagnostics.subscribe('lockdog:acquire', onAcquire)
    // In line in Redis, and subscribed to the key's notices (a hand-off
    // announced before the subscription would reach it only by its retry).
    const inLine = (what) => waitFor(async () => (await redis.llen(`{${key}}:line`)) === 1 &&
      (await redis.pubsub('NUMSUB', `__lockdog:released:${key}`))[1] >= 1, { what })
    const fences = []
    const took = (lock) => {
      assert.equal(typeof lock.fence, 'number')
      fences.push(lock.fence)
      return lock
    }
    try {
      // Taken in turn, each after the other's release.
      await took(await a.acquire(key, opts)).release()
      const second = took(await b.acquire(key, opts))
      assert.equal((await a.inspect(key)).fence, second.fence)
      await second.release()

      // Handed over to a waiter of another client: the fence comes with the notice.
      const held = took(await a.acquire(key, opts))
      const waiting = b.acquire(key, { ...opts, waitTimeout: 20000 })
      await inLine('the waiter in line')
      const before = await scriptCalls(redis)
      const released = performance.now()
      await held.release()
      const handed = took(await waiting)
      assert.ok(performance.now() - released < 4000, 'served by the hand-off, not its retry timer')
      assert.equal(await scriptCalls(redis) - before, 1, 'one script call, the release: the waiter read its fence in the notice')
      assert.equal(await redis.get(`{${key}}:fence`), String(handed.fence))
      assert.equal((await b.inspect(key)).fence, handed.fence)
      assert.equal(published.find((m) => m.token === handed.token)?.fence, handed.fence, 'lockdog:acquire agrees')

      // Handed over by a holder that takes no fences itself: the waiter's place asks for one.
      const waitingAgain = a.acquire(key, { ...opts, waitTimeout: 20000 })
      await inLine('the waiter in line again')
      await handed.release()
      const afterHandOff = took(await waitingAgain)
      const waitingForUnfenced = unfenced.acquire(key, { ...opts, waitTimeout: 20000 })
      await inLine('the unfenced waiter in line')
      await afterHandOff.release()
      const plain = await waitingForUnfenced
      assert.equal(plain.fence, null, 'a client without fencing has none')
      const waitingForFence = b.acquire(key, { ...opts, waitTimeout: 20000 })
      await inLine('the fenced waiter behind it')
      await plain.release()
      await took(await waitingForFence).release()

      // Handed over with no announcement (as on a cluster): the waiter's next
      // attempt finds the key holding its token and reads the fence then.
      await redis.set(key, 'f:by-hand', 'PX', 5000)
      const quiet = a.acquire(key, { ...opts, retryDelay: 50, retryJitter: 10, waitTimeout: 20000 })
      await inLine('the waiter in line behind the key set by hand')
      assert.equal(await redis.eval(script('fair_release'), 3, key, `{${key}}:line`, `{${key}}:fence`, 'f:by-hand', '', '0'), 1)
      const found = took(await quiet)
      assert.equal(await redis.get(`{${key}}:fence`), String(found.fence))
      await found.release()

      for (let i = 1; i < fences.length; i++) assert.ok(fences[i] > fences[i - 1], `fences strictly increasing: ${fences}`)
    } finally {
      diagnostics.unsubscribe('lockdog:acquire', onAcquire)
      await Promise.all([a.close(), b.close(), unfenced.close()])
    }
  })
}

test('a fair attempt retried after its reply was lost gets the same fence, not a new one', async () => {
  const key = 'fairfence:retried'
  const locks = new LockClient({ url: server.url, fencing: true })
  try {
    const before = await locks.acquire(key, { fair: true })
    await before.release()
    // The attempt as the client sends it: key, line, fence counter; token, ttl, place lease, attempt.
    const attempt = () => redis.eval(script('fair_acquire'), 3, key, `{${key}}:line`, `{${key}}:fence`, 'f:retried', 5000, 2000, 1)
    const [took, fence] = await attempt()
    assert.equal(took, 1)
    assert.ok(fence > before.fence)
    assert.deepEqual(await attempt(), [1, fence], 'the retry finds the key its own: the fence as it stands')
    assert.equal((await locks.inspect(key)).fence, fence)
    await redis.del(key)
    const next = await locks.acquire(key, { fair: true })
    assert.ok(next.fence > fence, 'the next holder gets a larger one')
    await next.release()
  } finally {
    await locks.close()
  }
})

test('permits take no fence: a semaphore\'s and a read-write lock\'s fence is null, fair or not', async () => {
  const locks = new LockClient({ url: server.url, fencing: true })
  try {
    for (const fair of [false, true]) {
      const sem = await locks.semaphore(`fencesem:${fair}`, { limit: 2, fair }).acquire()
      assert.equal(sem.fence, null)
      await sem.release()
      const rw = locks.readWriteLock(`fencerw:${fair}`, { fair })
      const reader = await rw.readLock()
      assert.equal(reader.fence, null)
      await reader.release()
      const writer = await rw.writeLock()
      assert.equal(writer.fence, null)
      await writer.release()
    }
  } finally {
    await locks.close()
  }
})
