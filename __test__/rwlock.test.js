'use strict'

// locks.readWriteLock(key): any number of readers or one writer, writer
// preference; each reader and writer is a Lock renewed by the native watchdog.

const { test, before, after, describe } = require('node:test')
const assert = require('node:assert/strict')
const { LockClient, ReadWriteLock } = require('..')
const { serverAndClient, startRedis, waitFor, aborted } = require('./helpers')

const keepAlive = setInterval(() => {}, 1000)

describe('one node', () => {
  let server
  let redis
  let locks
  serverAndClient({ client: { ttl: 5000 } }, (s) => ({ server, redis, locks } = s))
  after(() => clearInterval(keepAlive))

  test('readers share; a writer is alone', async () => {
    const rw = locks.readWriteLock('rw:a')
    assert.ok(rw instanceof ReadWriteLock)
    assert.equal(rw.key, 'rw:a')
    const r1 = await rw.readLock()
    const r2 = await rw.readLock()
    assert.equal(await redis.zcard('rw:a'), 2)
    assert.equal(await rw.tryWriteLock(), null, 'no writer beside readers')
    assert.equal(await r1.release(), true)
    assert.equal(await r2.release(), true)
    const w = await rw.writeLock({ waitTimeout: 1000 })
    assert.equal(await rw.tryReadLock(), null, 'no reader beside the writer')
    assert.equal(await rw.tryWriteLock(), null, 'no second writer')
    await w.release()
    const r3 = await rw.tryReadLock()
    assert.ok(r3)
    await r3.release()
  })

  test('writer preference: once a writer waits, new readers wait behind it', async () => {
    const rw = locks.readWriteLock('rw:pref')
    const other = new LockClient({ url: server.url, ttl: 5000 })
    try {
      const reader = await rw.readLock()
      const order = []
      const writing = other.readWriteLock('rw:pref').writeLock({ waitTimeout: 8000, retryDelay: 50 }).then((l) => {
        order.push('writer')
        return l
      })
      await waitFor(async () => (await redis.exists('{rw:pref}:writer')) === 1, { what: 'the waiting writer\'s mark' })
      assert.equal(await rw.tryReadLock(), null, 'a new reader does not pass a waiting writer')
      const lateReader = rw.readLock({ waitTimeout: 8000 }).then((l) => {
        order.push('reader')
        return l
      })
      await reader.release()
      const w = await writing
      assert.deepEqual(order, ['writer'])
      await w.release()
      const r = await lateReader
      assert.deepEqual(order, ['writer', 'reader'])
      await r.release()
    } finally {
      await other.close()
    }
  })

  test('a reader that loses its place is told; withWriteLock and withReadLock settle like withLock', async () => {
    const rw = locks.readWriteLock('rw:lost', { ttl: 600 })
    const reader = await rw.readLock()
    await redis.zrem('rw:lost', reader.token)
    await aborted(reader.signal)
    assert.equal(reader.signal.reason.code, 'ERR_LOCK_LOST')
    assert.equal(await rw.withWriteLock(async (signal, lock) => (signal.aborted ? 0 : lock.key)), 'rw:lost')
    assert.deepEqual(await Promise.all([rw.withReadLock(async () => 1), rw.withReadLock(async () => 2)]), [1, 2])
    await assert.rejects(rw.withReadLock(async (signal, lock) => {
      await redis.zrem('rw:lost', lock.token)
      await aborted(signal)
      return 'r'
    }), (e) => e.code === 'ERR_LOCK_LOST' && e.cause === 'r')
  })

  test('bad arguments throw synchronously with a code', () => {
    assert.throws(() => locks.readWriteLock(42), { code: 'ERR_INVALID_ARG_TYPE' })
    assert.throws(() => locks.readWriteLock(''), { code: /^ERR_INVALID_ARG/ })
    assert.throws(() => locks.readWriteLock('k', { limit: 2 }), { code: 'ERR_INVALID_ARG_VALUE' })
    const rw = locks.readWriteLock('k')
    assert.throws(() => rw.readLock({ permits: 2 }), { code: 'ERR_INVALID_ARG_VALUE' })
    assert.throws(() => rw.writeLock({ ttl: 0 }), { code: 'ERR_OUT_OF_RANGE' })
    assert.throws(() => rw.withReadLock('fn'), { code: 'ERR_INVALID_ARG_TYPE' })
    assert.throws(() => rw.withWriteLock(null), { code: 'ERR_INVALID_ARG_TYPE' })
  })
})

describe('three nodes (Redlock)', () => {
  let servers
  before(async () => {
    servers = await Promise.all([startRedis(), startRedis(), startRedis()])
  })
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()))
  })

  test('a writer excludes readers of another client; readers share across clients', async () => {
    const nodes = servers.map((s) => s.url)
    const a = new LockClient({ nodes })
    const b = new LockClient({ nodes })
    try {
      const w = await a.readWriteLock('rw:rl').writeLock()
      assert.equal(await b.readWriteLock('rw:rl').tryReadLock(), null)
      await w.release()
      const r1 = await a.readWriteLock('rw:rl').readLock()
      const r2 = await b.readWriteLock('rw:rl').readLock()
      assert.equal(await b.readWriteLock('rw:rl').tryWriteLock(), null)
      await r1.release()
      await r2.release()
    } finally {
      await a.close()
      await b.close()
    }
  })
})
