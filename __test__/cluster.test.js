'use strict'

// `cluster` from JavaScript against a real local Redis Cluster (3 masters, 3
// replicas). The failover under held locks is covered in tests/cluster.rs.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const Redis = require('ioredis')
const { LockClient } = require('..')
const { startRedis, waitFor } = require('./helpers')

const CLUSTER_ARGS = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000']

let servers = []
let seeds
let redis

before(async () => {
  servers = await Promise.all(Array.from({ length: 6 }, () => startRedis(CLUSTER_ARGS)))
  execFileSync('redis-cli', ['--cluster', 'create', ...servers.map((s) => `127.0.0.1:${s.port}`),
    '--cluster-replicas', '1', '--cluster-yes'], { stdio: 'ignore', timeout: 20000 })
  const info = (port) => execFileSync('redis-cli', ['-p', String(port), 'CLUSTER', 'INFO'], { encoding: 'utf8' })
  await waitFor(() => servers.every((s) => info(s.port).includes('cluster_state:ok')),
    { timeout: 20000, what: 'cluster_state:ok on every node' })
  seeds = servers.slice(0, 3).map((s) => s.url)
  redis = new Redis.Cluster(servers.map((s) => ({ host: '127.0.0.1', port: s.port })))
})

after(async () => {
  if (redis) redis.disconnect()
  await Promise.all(servers.map((s) => s.stop()))
})

test('cluster cannot be combined with url or nodes, and must be a string array', () => {
  for (const extra of [{ url: 'redis://127.0.0.1:1' }, { nodes: ['redis://127.0.0.1:1'] }]) {
    assert.throws(() => new LockClient({ cluster: ['redis://127.0.0.1:1'], ...extra }), { code: 'ERR_INVALID_ARG_VALUE', message: /cluster/ })
  }
  assert.throws(() => new LockClient({ cluster: 'redis://127.0.0.1:1' }), { code: 'ERR_INVALID_ARG_TYPE' })
  assert.throws(() => new LockClient({ cluster: [] }), { code: 'ERR_INVALID_ARG_VALUE' })
  assert.throws(() => new LockClient({ cluster: ['unix:///tmp/x.sock'] }), { code: 'ERR_INVALID_ARG_VALUE' })
})

test('keys in different hash slots are rejected synchronously, explaining hash tags', async () => {
  const locks = new LockClient({ cluster: ['redis://127.0.0.1:1'] })
  assert.throws(() => locks.acquire(['order:42:pay', 'order:42:ship']), (err) => {
    assert.equal(err.code, 'ERR_INVALID_ARG_VALUE')
    assert.match(err.message, /hash slot/)
    assert.match(err.message, /order:\{42\}:pay/)
    return true
  })
  await locks.close()
})

test('locks route by key, with several keys of one slot as one lock', async () => {
  const locks = new LockClient({ cluster: seeds, keyPrefix: 'jscl:', ttl: 1500 })
  const other = new LockClient({ cluster: seeds, keyPrefix: 'jscl:' })
  try {
    assert.equal(locks.nodes.length, 1, 'a cluster is one lock node')
    const many = await Promise.all(Array.from({ length: 12 }, (_, i) => locks.acquire(`k${i}`)))
    const owners = new Set()
    for (const lock of many) {
      assert.equal(await redis.get(`jscl:${lock.key}`), lock.token)
      const slot = await redis.cluster('KEYSLOT', `jscl:${lock.key}`)
      const master = redis.slots[slot][0]
      owners.add(master)
    }
    assert.ok(owners.size >= 2, `keys on several masters: ${[...owners]}`)

    const result = await locks.withLock(['order:{7}:pay', 'order:{7}:ship'], async (signal) => {
      assert.equal(await other.tryAcquire('order:{7}:ship'), null)
      await new Promise((r) => setTimeout(r, 2000)) // past the ttl: renewed by the watchdog
      assert.equal(signal.aborted, false)
      return 'paid'
    })
    assert.equal(result, 'paid')
    assert.equal(await redis.exists('jscl:order:{7}:pay'), 0)

    const seen = await locks.inspect('k0')
    assert.equal(seen.held, true)
    await many[1].extend(5000)
    assert.ok((await redis.pttl('jscl:k1')) > 2000)
    assert.equal(await other.forceRelease('k2'), 1)
    for (const lock of many) await lock.release()
  } finally {
    await locks.close()
    await other.close()
  }
})

test('fair locks on a cluster carry fences: taken in turn, and handed over with no notice', async () => {
  const locks = new LockClient({ cluster: seeds, keyPrefix: 'jsfence:', fencing: true })
  const other = new LockClient({ cluster: seeds, keyPrefix: 'jsfence:', fencing: true })
  try {
    const first = await locks.acquire('f', { fair: true })
    await first.release()
    const second = await other.acquire('f', { fair: true })
    assert.ok(second.fence > first.fence, `${second.fence} after ${first.fence}`)
    const contended = locks.stats().contended
    const waiting = locks.acquire('f', { fair: true, waitTimeout: 4000, retryDelay: 50, retryJitter: 10 })
    await waitFor(() => locks.stats().contended > contended, { what: 'the waiter in line' })
    // The release hands the key over; with no notices on a cluster the waiter
    // finds it holding its token at its next attempt, and reads the fence then.
    await second.release()
    const handed = await waiting
    assert.ok(handed.fence > second.fence, `handed over: ${handed.fence} after ${second.fence}`)
    assert.equal(await redis.get('{jsfence:f}:fence'), String(handed.fence))
    assert.equal((await other.inspect('f')).fence, handed.fence)
    await handed.release()
  } finally {
    await locks.close()
    await other.close()
  }
})

test('semaphores, read-write locks and fair locks on a cluster: renewed, counted, exclusive', async () => {
  const locks = new LockClient({ cluster: seeds, keyPrefix: 'jsprim:', ttl: 1200 })
  const other = new LockClient({ cluster: seeds, keyPrefix: 'jsprim:', ttl: 1200 })
  const keepAlive = setInterval(() => {}, 1000)
  try {
    // Several semaphores, on different masters.
    const sems = ['s1', 's2', 's3', 's4'].map((k) => locks.semaphore(k, { limit: 2 }))
    const held = await Promise.all(sems.map((s) => s.acquire({ permits: 2 })))
    for (const s of sems) assert.equal(await other.semaphore(s.key, { limit: 2 }).tryAcquire(), null)
    const rw = locks.readWriteLock('doc')
    const writer = await rw.writeLock()
    assert.equal(await other.readWriteLock('doc').tryReadLock(), null)
    const fair = await locks.acquire('f', { fair: true })
    const until = Date.now() + 2500
    await waitFor(() => Date.now() >= until, { timeout: 5000, what: 'two leases' })
    for (const l of [...held, writer, fair]) assert.equal(l.status, 'held', `${l.key} renewed on its master`)
    for (const s of sems) assert.equal(await s.count(), 2)
    for (const l of [...held, writer, fair]) assert.equal(await l.release(), true)
    const reader = await other.readWriteLock('doc').readLock({ waitTimeout: 2000 })
    await reader.release()
    // Fair waiters on a cluster: the line and each place live in the key's slot;
    // the release hands the lock to the waiter, who finds it at its next attempt.
    const first = await locks.acquire('f', { fair: true })
    const semHeld = await other.semaphore('fs', { limit: 1, fair: true }).acquire()
    const contended = [locks.stats().contended, other.stats().contended]
    const waiting = other.acquire('f', { fair: true, waitTimeout: 4000, retryDelay: 50 })
    const semWaiting = locks.semaphore('fs', { limit: 1, fair: true }).acquire({ waitTimeout: 4000, retryDelay: 50 })
    // Both waiters took their places in line.
    await waitFor(() => locks.stats().contended > contended[0] && other.stats().contended > contended[1], { what: 'both waiters in line' })
    await first.release()
    await semHeld.release()
    const next = await waiting
    assert.equal(next.status, 'held')
    await next.release()
    await (await semWaiting).release()
  } finally {
    clearInterval(keepAlive)
    await locks.close()
    await other.close()
  }
})
