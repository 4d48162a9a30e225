'use strict'

// locks.adopt(key, token) continues a lock whose token is known (handed over by
// another process, or kept across a restart); locks.isLocked(key) reads a key.
// The redlock drop-in releases and extends a Lock rebuilt from a stored value
// the same way.

const { test, before, after, describe } = require('node:test')
const assert = require('node:assert/strict')
const { LockClient } = require('..')
const Redlock = require('../redlock')
const { ExecutionError } = Redlock
const { serverAndClient, startRedis, inspector, waitFor, aborted, runWorker } = require('./helpers')

// The watchdog never keeps Node alive; tests that wait for a renewal or a loss do.
const keepAlive = setInterval(() => {}, 1000)

describe('one node', () => {
  let server
  let redis
  let locks
  serverAndClient({ client: {} }, (s) => ({ server, redis, locks } = s))
  after(() => clearInterval(keepAlive))

  test('a lock left by a process that exited is adopted by its token and renewed by the watchdog', async () => {
    // The previous owner: another process that took the lock and exited without releasing.
    const worker = runWorker('holder.js', [server.url, 'ad:handover', 1200, 'exit'])
    const { lines, code, stderr } = await worker.exited
    assert.equal(code, 0, stderr)
    const token = lines.find((l) => l.token).token
    assert.equal(await redis.get('ad:handover'), token)
    const lock = await locks.adopt('ad:handover', token, { ttl: 900 })
    assert.equal(lock.token, token)
    assert.equal(lock.key, 'ad:handover')
    assert.equal(lock.ttl, 900)
    assert.equal(lock.held, true)
    assert.equal(lock.fence, null)
    const pttl = await redis.pttl('ad:handover')
    assert.ok(pttl > 0 && pttl <= 900, `the adopting extend set the new lease: pttl ${pttl}`)
    // Three leases later it is still ours: the watchdog renewed it.
    const until = Date.now() + 2700
    await waitFor(() => Date.now() >= until, { timeout: 5000, what: 'three leases' })
    assert.equal(await redis.get('ad:handover'), token)
    assert.equal(lock.held, true)
    assert.equal(await locks.isLocked('ad:handover'), true)
    assert.equal(await lock.release(), true)
    assert.equal(await redis.exists('ad:handover'), 0)
    assert.equal(await locks.isLocked('ad:handover'), false)
  })

  test('another token or a missing key is refused with ERR_LOCK_LOST and nothing is written', async () => {
    await redis.set('ad:other', 'someone-else', 'PX', 5000)
    await assert.rejects(locks.adopt('ad:other', 'not-the-token', { ttl: 60000 }), { code: 'ERR_LOCK_LOST', key: 'ad:other' })
    assert.equal(await redis.get('ad:other'), 'someone-else')
    assert.ok((await redis.pttl('ad:other')) <= 5000, 'the foreign lease is untouched')
    await assert.rejects(locks.adopt('ad:missing', 'a-token'), { code: 'ERR_LOCK_LOST' })
    assert.equal(await redis.exists('ad:missing'), 0, 'adopt never creates a key')
    assert.equal(locks.stats().held, 0)
  })

  test('an adopted lock that is taken away is reported lost: signal, onLost, \'lost\'', async () => {
    await redis.set('ad:lost', 'tok-1', 'PX', 5000)
    const seen = []
    const onLostEvent = (err) => seen.push(['event', err.code])
    locks.on('lost', onLostEvent)
    const lock = await locks.adopt('ad:lost', 'tok-1', { ttl: 600, onLost: (err) => seen.push(['onLost', err.code]) })
    await redis.set('ad:lost', 'intruder')
    const at = await aborted(lock.signal)
    assert.ok(at > 0)
    assert.equal(lock.signal.reason.code, 'ERR_LOCK_LOST')
    await waitFor(() => seen.length === 2, { what: 'onLost and the lost event' })
    assert.deepEqual(seen.sort(), [['event', 'ERR_LOCK_LOST'], ['onLost', 'ERR_LOCK_LOST']])
    assert.equal(lock.status, 'lost')
    assert.equal(await redis.get('ad:lost'), 'intruder', 'the new owner keeps its key')
    locks.off('lost', onLostEvent)
  })

  test('a multi-key lock is adopted all or nothing', async () => {
    const held = await locks.acquire(['ad:m1', 'ad:m2'], { ttl: 5000 })
    const other = new LockClient({ url: server.url })
    try {
      const lock = await other.adopt(['ad:m1', 'ad:m2'], held.token, { ttl: 3000 })
      assert.deepEqual(lock.keys, ['ad:m1', 'ad:m2'])
      await redis.set('ad:m2', 'x')
      await assert.rejects(other.adopt(['ad:m1', 'ad:m2'], held.token), { code: 'ERR_LOCK_LOST' })
    } finally {
      await other.close()
      await held.release()
    }
  })

  test('releaseToken deletes a lock by its token where it is held, without adopting it', async () => {
    const held = await locks.acquire('ad:rt', { ttl: 5000, autoRenew: false })
    const other = new LockClient({ url: server.url })
    try {
      assert.deepEqual(await other.releaseToken('ad:rt', 'not-the-token').then((r) => r.released), false)
      assert.equal(await redis.get('ad:rt'), held.token, 'another token deletes nothing')
      const { released, nodes } = await other.releaseToken('ad:rt', held.token)
      assert.equal(released, true)
      assert.deepEqual(nodes.map((n) => n.answer), ['ok'])
      assert.equal(await redis.exists('ad:rt'), 0)
      const again = await other.releaseToken('ad:rt', held.token)
      assert.deepEqual([again.released, again.nodes[0].answer], [false, 'not-held'])
      assert.throws(() => other.releaseToken('ad:rt', ''), { code: 'ERR_INVALID_ARG_VALUE' })
      assert.throws(() => other.releaseToken('ad:rt', 7), { code: 'ERR_INVALID_ARG_TYPE' })
      assert.throws(() => other.releaseToken([], 'tok'), { code: 'ERR_INVALID_ARG_VALUE' })
    } finally {
      await other.close()
      await held.release().catch(() => false)
    }
  })

  test('bad arguments throw synchronously with a code', () => {
    assert.throws(() => locks.adopt('k', ''), { code: 'ERR_INVALID_ARG_VALUE' })
    assert.throws(() => locks.adopt('k', 42), { code: 'ERR_INVALID_ARG_TYPE' })
    assert.throws(() => locks.adopt('k', 'x'.repeat(1025)), { code: 'ERR_INVALID_ARG_VALUE' })
    assert.throws(() => locks.adopt('', 'tok'), { code: /^ERR_INVALID_ARG/ })
    assert.throws(() => locks.adopt('k', 'tok', { waitTimeout: 10 }), { code: 'ERR_INVALID_ARG_VALUE' })
    assert.throws(() => locks.adopt('k', 'tok', { ttl: 0 }), { code: 'ERR_OUT_OF_RANGE' })
    assert.throws(() => locks.adopt('k', 'tok', { ttl: 1.5 }), { code: 'ERR_OUT_OF_RANGE' })
    assert.throws(() => locks.isLocked(7), { code: 'ERR_INVALID_ARG_TYPE' })
  })

  test('the redlock drop-in releases and extends a Lock rebuilt from a stored value', async () => {
    const redlock = new Redlock([server.url], { retryCount: 0 })
    try {
      const held = await redlock.acquire(['ad:r'], 2000)
      const stored = JSON.stringify({ resources: held.resources, value: held.value, expiration: held.expiration })
      const { resources, value, expiration } = JSON.parse(stored)
      const rebuilt = new Redlock.Lock(redlock, resources, value, [], expiration)
      const extended = await rebuilt.extend(8000)
      assert.equal(extended.value, held.value)
      assert.ok((await redis.pttl('ad:r')) > 5000, 'the rebuilt lock was extended by its token')
      assert.ok(extended.expiration > Date.now() + 5000)
      const again = new Redlock.Lock(redlock, resources, value, [], extended.expiration)
      await again.release()
      assert.equal(await redis.exists('ad:r'), 0)
      // A rebuilt Lock whose value no longer holds the key: nothing to release or extend.
      await redis.set('ad:r', 'someone else', 'PX', 5000)
      const stale = new Redlock.Lock(redlock, resources, value, [], Date.now() + 5000)
      await assert.rejects(stale.extend(1000), (e) => e instanceof ExecutionError)
      await assert.rejects(stale.release(), (e) => e instanceof ExecutionError)
      assert.equal(await redis.get('ad:r'), 'someone else')
    } finally {
      await redlock.quit()
    }
  })
})

describe('three nodes', () => {
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

  test('adopt needs the token on a quorum; isLocked reads a quorum', async () => {
    const locks = new LockClient({ nodes: servers.map((s) => s.url) })
    try {
      await redises[0].set('ad:q', 'tok', 'PX', 5000)
      assert.equal(await locks.isLocked('ad:q'), false, 'one of three is no quorum')
      await assert.rejects(locks.adopt('ad:q', 'tok', { ttl: 2000 }), { code: 'ERR_LOCK_LOST' })
      await redises[1].set('ad:q', 'tok', 'PX', 5000)
      assert.equal(await locks.isLocked('ad:q'), true)
      const lock = await locks.adopt('ad:q', 'tok', { ttl: 2000 })
      // adopt resolves at quorum; every node has answered once the client settled.
      await locks.settled()
      assert.ok((await redises[0].pttl('ad:q')) <= 2000)
      assert.equal(await redises[2].exists('ad:q'), 0, 'the third node gets no key')
      assert.equal(await lock.release(), true)
      await locks.settled()
      assert.deepEqual(await Promise.all(redises.map((r) => r.exists('ad:q'))), [0, 0, 0])
    } finally {
      await locks.close()
    }
  })
})
