'use strict'

// Redis Sentinel: locks go to the master the sentinels name and follow it to
// the replica a failover promotes. Each failover case gets a deployment of its
// own (a master, a replica, three sentinels), started and stopped by PID.

const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const path = require('node:path')
const { LockClient } = require('..')
const { waitFor } = require('./helpers')
const { startSentinels, call } = require('./helpers/sentinel')

function client(topology, options = {}) {
  const c = new LockClient({ sentinel: { sentinels: topology.urls, name: topology.name }, connectTimeout: 1000, ...options })
  c.lostEvents = []
  c.on('lost', (err, lock) => c.lostEvents.push({ err, lock }))
  c.on('error', () => {})
  return c
}

const get = (server, key) => call(server.port, 'GET', key)
const pttl = (server, key) => call(server.port, 'PTTL', key)

describe('sentinel', () => {
  let topology

  before(async () => {
    topology = await startSentinels()
  })

  after(async () => {
    await topology?.stop()
  })

  test('acquire and release through the sentinels, on the master they name', async () => {
    const c = client(topology)
    try {
      assert.deepEqual(c.nodes, [`sentinel mymaster (${topology.urls.map((u) => u.slice('redis://'.length)).join(',')})`])
      const lock = await c.acquire('s:basic', { ttl: 5000 })
      assert.equal(await get(topology.master, 's:basic'), lock.token)
      assert.equal(await c.tryAcquire('s:basic'), null, 'held: a second acquire finds it taken')
      await lock.release()
      assert.equal(await get(topology.master, 's:basic'), null)
      // waitReplicas works here: one master with a replica.
      const acked = await c.acquire('s:acked', { ttl: 5000, waitReplicas: 1, waitReplicasTimeout: 1000 })
      assert.equal(acked.replicas, 1)
      assert.equal(await get(topology.replica, 's:acked'), acked.token)
      await acked.release()
    } finally {
      await c.close()
    }
  })

  test('a sentinel that is down is skipped; one that does not know the name is an unreachable node', async () => {
    const dead = 'redis://127.0.0.1:1'
    const c = client(topology, { sentinel: { sentinels: [dead, ...topology.urls], name: topology.name } })
    const unknown = client(topology, { sentinel: { sentinels: topology.urls, name: 'nosuchmaster' }, waitTimeout: 300 })
    try {
      const lock = await c.acquire('s:skip', { ttl: 5000 })
      assert.equal(await get(topology.master, 's:skip'), lock.token)
      await lock.release()
      const err = await unknown.acquire('s:unknown').then(() => assert.fail('acquired without a master'), (e) => e)
      assert.equal(err.code, 'ERR_LOCK_CONNECTION', String(err))
      assert.match(err.message, /sentinel/)
    } finally {
      await c.close()
      await unknown.close()
    }
  })

  test('command line: --sentinel and --sentinel-name (or LOCKDOG_SENTINELS and LOCKDOG_SENTINEL_NAME)', async () => {
    const lockdog = (args, env = {}) => spawnSync(process.execPath, [path.join(__dirname, '..', 'bin', 'lockdog.js'), ...args],
      { encoding: 'utf8', env: { ...process.env, REDIS_URL: 'redis://127.0.0.1:1', LOCKDOG_NODES: '', ...env }, timeout: 20000 })
    const c = client(topology)
    try {
      const lock = await c.acquire('s:cli', { ttl: 10000 })
      const held = lockdog(['status', '--json', '--sentinel', topology.urls.join(','), '--sentinel-name', topology.name, 's:cli'])
      assert.equal(held.status, 1, held.stderr)
      assert.equal(JSON.parse(held.stdout).held, true)
      await lock.release()
      const env = { LOCKDOG_SENTINELS: topology.urls.join(','), LOCKDOG_SENTINEL_NAME: topology.name }
      const run = lockdog(['exec', '-k', 's:cli', '--', process.execPath, '-e', 'process.exit(7)'], env)
      assert.equal(run.status, 7, run.stderr)
      const free = lockdog(['status', 's:cli'], env)
      assert.equal(free.status, 0, free.stderr)
    } finally {
      await c.close()
    }
  })

  test('a paused sentinel does not hold up the lookup once the others answered', async () => {
    const paused = topology.sentinels[0]
    paused.pause()
    const c = client(topology, { connectTimeout: 3000 })
    try {
      const started = performance.now()
      const lock = await c.acquire('s:paused', { ttl: 5000 })
      const took = performance.now() - started
      assert.ok(took < 1500, `acquired in ${Math.round(took)} ms, not after the paused sentinel's timeout`)
      assert.equal(await get(topology.master, 's:paused'), lock.token)
      await lock.release()
    } finally {
      paused.resume()
      await c.close()
    }
  })

  test('bad sentinel options are typed errors, thrown by the constructor', () => {
    const urls = topology.urls
    const cases = [
      [{ sentinel: { sentinels: [], name: 'm' } }, 'ERR_INVALID_ARG_VALUE', /sentinel\.sentinels/],
      [{ sentinel: { name: 'm' } }, 'ERR_INVALID_ARG_TYPE', /sentinel\.sentinels/],
      [{ sentinel: { sentinels: urls } }, 'ERR_INVALID_ARG_TYPE', /sentinel\.name/],
      [{ sentinel: { sentinels: urls, name: '' } }, 'ERR_INVALID_ARG_VALUE', /sentinel\.name/],
      [{ sentinel: { sentinels: 'redis://127.0.0.1:26379', name: 'm' } }, 'ERR_INVALID_ARG_TYPE', /sentinel\.sentinels/],
      [{ sentinel: { sentinels: [42], name: 'm' } }, 'ERR_INVALID_ARG_TYPE', /sentinel\.sentinels/],
      [{ sentinel: { sentinels: urls, name: 7 } }, 'ERR_INVALID_ARG_TYPE', /sentinel\.name/],
      [{ sentinel: { sentinels: urls, name: 'm', masterName: 'x' } }, 'ERR_INVALID_ARG_VALUE', /sentinel\.masterName.*not a known option/],
      [{ sentinel: { sentinels: ['http://127.0.0.1:26379'], name: 'm' } }, 'ERR_INVALID_ARG_VALUE', /redis:\/\//],
      [{ sentinel: { sentinels: ['rediss://127.0.0.1:26379'], name: 'm' } }, 'ERR_INVALID_ARG_VALUE', /TLS/],
      [{ sentinel: { sentinels: ['redis://[::1'], name: 'm' } }, 'ERR_INVALID_ARG_VALUE', /sentinel\.sentinels/],
      [{ sentinel: { sentinels: urls, name: 'm', db: -1 } }, 'ERR_OUT_OF_RANGE', /sentinel\.db/],
      [{ sentinel: { sentinels: urls, name: 'm', db: 1.5 } }, 'ERR_OUT_OF_RANGE', /sentinel\.db/],
      [{ sentinel: { sentinels: urls, name: 'm', password: 1 } }, 'ERR_INVALID_ARG_TYPE', /sentinel\.password/],
      [{ sentinel: 'redis://127.0.0.1:26379' }, 'ERR_INVALID_ARG_TYPE', /sentinel/],
      [{ sentinel: { sentinels: urls, name: 'm' }, url: 'redis://127.0.0.1:1' }, 'ERR_INVALID_ARG_VALUE', /cannot be combined/],
      [{ sentinel: { sentinels: urls, name: 'm' }, nodes: ['redis://127.0.0.1:1'] }, 'ERR_INVALID_ARG_VALUE', /cannot be combined/],
      [{ sentinel: { sentinels: urls, name: 'm' }, cluster: ['redis://127.0.0.1:1'] }, 'ERR_INVALID_ARG_VALUE', /cannot be combined/],
      [{ sentinel: { sentinels: urls, name: 'm' }, tls: {} }, 'ERR_INVALID_ARG_VALUE', /tls/],
    ]
    for (const [options, code, message] of cases) {
      assert.throws(() => new LockClient(options), (e) => e.code === code && message.test(e.message), JSON.stringify(options))
    }
    // Passwords never show in errors or node names.
    const c = new LockClient({ sentinel: { sentinels: ['redis://:s3cret@127.0.0.1:26379'], name: 'm', password: 'pw' } })
    assert.doesNotMatch(c.nodes.join(), /s3cret|pw/)
    c.close()
  })
})

describe('sentinel failover', () => {
  let topology

  before(async () => {
    topology = await startSentinels()
  })

  after(async () => {
    await topology?.stop()
  })

  test('SENTINEL FAILOVER: renewals move to the new master; a key missing there is reported lost', async (t) => {
    const ttl = 3000
    const c = client(topology, { ttl })
    const probe = client(topology, { ttl })
    try {
      const kept = await c.acquire('s:kept', { waitReplicas: 1, waitReplicasTimeout: 1000 })
      const dropped = await c.acquire('s:dropped', { waitReplicas: 1, waitReplicasTimeout: 1000 })
      const onLost = []
      dropped.signal.addEventListener('abort', () => onLost.push(dropped.signal.reason))
      assert.equal(kept.replicas, 1)
      const old = topology.master
      const next = topology.replica
      const t0 = performance.now()
      // From the failover request on: the first acquire that lands on the new
      // master (the old one no longer replicates to it)...
      let i = 0
      const firstAcquire = waitFor(async () => {
        const lock = await probe.tryAcquire(`s:probe:${i++}`, { ttl: 1000, autoRenew: false })
        if (!lock) return false
        const here = await get(next, lock.key)
        const elsewhere = await get(old, lock.key)
        await lock.release()
        return here === lock.token && elsewhere !== lock.token && performance.now()
      }, { timeout: 20000, interval: 10, what: 'an acquire on the new master' })
      // ...and the first renewal there: its PTTL goes up once it is master.
      let last = null
      const firstRenewal = waitFor(async () => {
        const [role] = await call(next.port, 'ROLE')
        const now = await pttl(next, 's:kept')
        const renewed = role === 'master' && last !== null && now > last
        last = role === 'master' ? now : null
        return renewed && performance.now()
      }, { timeout: 20000, interval: 10, what: 'a renewal of s:kept on the new master' })
      const promoted = await topology.failover()
      const tPromoted = topology.promotedAt
      const tNamed = performance.now()
      assert.equal(promoted, next)
      // The replicated key is there; take the other one away, as if its write
      // had not reached the replica before the failover.
      assert.equal(await get(promoted, 's:kept'), kept.token)
      assert.equal(await call(promoted.port, 'DEL', 's:dropped'), 1)
      const tAcquire = await firstAcquire
      const tRenewed = await firstRenewal
      assert.equal(kept.signal.aborted, false, 'the replicated lock is not lost')
      assert.equal(await get(promoted, 's:kept'), kept.token)

      await waitFor(() => dropped.signal.aborted, { timeout: 2 * ttl, what: 'the loss of s:dropped' })
      assert.equal(dropped.signal.reason.code, 'ERR_LOCK_LOST')
      assert.equal(onLost.length, 1)
      assert.deepEqual(c.lostEvents.map((e) => e.lock.key), ['s:dropped'])
      assert.equal(kept.signal.aborted, false)

      // Later renewals keep going to the new master: between two polls the
      // PTTL only falls, unless a renewal raised it. (The loss above was seen
      // right after a renewal, so a PTTL read then may already be the full TTL.)
      let previous = await pttl(promoted, 's:kept')
      await waitFor(async () => {
        const now = await pttl(promoted, 's:kept')
        const raised = now > previous
        previous = now
        return raised
      }, { timeout: 2 * ttl, interval: 20, what: 'a second renewal on the new master' })
      await kept.release()
      assert.equal(await get(promoted, 's:kept'), null)
      t.diagnostic(`SENTINEL FAILOVER -> replica reports master: ${Math.round(tPromoted - t0)} ms; ` +
        `-> all sentinels name it: ${Math.round(tNamed - t0)} ms; ` +
        `-> first acquire on the new master: ${Math.round(tAcquire - t0)} ms; ` +
        `-> first renewal on the new master: ${Math.round(tRenewed - t0)} ms`)
    } finally {
      await c.close()
      await probe.close()
    }
  })

  test('release notices follow the master: a waiter subscribed before a failover is woken on the new master', async () => {
    const c = client(topology, { ttl: 5000 })
    const other = client(topology, { ttl: 5000 })
    const wait = { retryDelay: 5000, retryJitter: 0, waitTimeout: 15000 }
    const channel = (key) => `__lockdog:released:${key}`
    const subscribers = async (server, key) => (await call(server.port, 'PUBSUB', 'NUMSUB', channel(key)))[1]
    try {
      // The waiter's client subscribes on the current master once.
      const first = await topology.masterPort()
      const held = await c.acquire('s:n0')
      const waiting = other.acquire('s:n0', wait)
      await waitFor(async () => (await subscribers(topology.server(first), 's:n0')) >= 1, { what: 'the waiter subscribed' })
      await held.release()
      await (await waiting).release()

      const promoted = await topology.failover()
      // Take the key once the holder's client writes to the new master.
      const again = await waitFor(async () => {
        const lock = await c.acquire('s:n1')
        if ((await get(promoted, 's:n1')) === lock.token) return lock
        await lock.release()
        return false
      }, { timeout: 5000, what: 'an acquire on the new master' })
      const started = performance.now()
      const woken = other.acquire('s:n1', wait)
      await waitFor(async () => (await subscribers(promoted, 's:n1')) >= 1, { timeout: 5000, what: 'the waiter subscribed on the new master' })
      await again.release()
      const lock = await woken
      assert.ok(performance.now() - started < 4000, 'woken by the release notice, not by its 5 s retry timer')
      await lock.release()
    } finally {
      await c.close()
      await other.close()
    }
  })
})

describe('sentinel: the master killed', () => {
  let topology

  before(async () => {
    topology = await startSentinels()
  })

  after(async () => {
    await topology?.stop()
  })

  test('SIGKILL of the master: locks work again after the automatic failover, a replicated lock survives', async (t) => {
    const ttl = 10000
    const c = client(topology, { ttl, commandTimeout: 500 })
    try {
      const kept = await c.acquire('s:survivor', { waitReplicas: 1, waitReplicasTimeout: 1000 })
      assert.equal(kept.replicas, 1)
      const t0 = performance.now()
      await topology.master.kill()
      let i = 0
      const tAcquire = await waitFor(async () => {
        const lock = await c.tryAcquire(`s:after-kill:${i++}`, { ttl: 1000, autoRenew: false })
        if (!lock) return false
        const here = await get(topology.replica, lock.key)
        await lock.release()
        return here === lock.token && performance.now()
      }, { timeout: 30000, interval: 20, what: 'an acquire after the automatic failover' })
      assert.equal(await topology.masterPort(), topology.replica.port)
      assert.equal(await get(topology.replica, 's:survivor'), kept.token)
      const now = await pttl(topology.replica, 's:survivor')
      await waitFor(async () => (await pttl(topology.replica, 's:survivor')) > now,
        { timeout: ttl, interval: 20, what: 'a renewal of the surviving lock on the new master' })
      assert.equal(kept.signal.aborted, false)
      assert.equal(c.lostEvents.length, 0)
      // The connection used for waitReplicas moved too (no replica is left to acknowledge).
      const acked = await c.acquire('s:acked-after', { waitReplicas: 1, waitReplicasTimeout: 100 })
      assert.equal(await get(topology.replica, 's:acked-after'), acked.token)
      assert.equal(acked.replicas, 0)
      await acked.release()
      await kept.release()
      t.diagnostic(`master SIGKILL -> first acquire on the new master: ${Math.round(tAcquire - t0)} ms (down-after-milliseconds 1000)`)
    } finally {
      await c.close()
    }
  })
})
