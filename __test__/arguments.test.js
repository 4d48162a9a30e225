'use strict'

// Argument checking, in one place: every bad key, ttl, option, callback and client
// option gets a typed error with a stable code, thrown synchronously, and touches
// nothing; hostile arguments (Proxies, shifting getters, a shared AbortSignal) are
// read once. (The option names themselves: options.test.js; the randomized sweep:
// the fault suite's bad-input scenario.)

const { test, describe } = require('node:test')
const assert = require('node:assert/strict')
const { getEventListeners } = require('node:events')
const { LockClient, DistributedLock, withLock } = require('..')
const { serverAndClient } = require('./helpers')

describe('bad keys, ttls, options and callbacks', () => {
  let server
  let redis
  let locks
  serverAndClient({ client: {} }, (s) => ({ server, redis, locks } = s))

  const TYPE = 'ERR_INVALID_ARG_TYPE'
  const VALUE = 'ERR_INVALID_ARG_VALUE'
  const RANGE = 'ERR_OUT_OF_RANGE'

  const badKeys = [
    [undefined, TYPE], [null, TYPE], [42, TYPE], [{}, TYPE], [Buffer.from('k'), TYPE], [['a', 1], TYPE],
    ['', VALUE], [[], VALUE], [['a', ''], VALUE], ['\uD800lone', VALUE],
    ['x'.repeat(64 * 1024 + 1), RANGE],
  ]

  const badTtls = [
    [0, RANGE], [-1, RANGE], [NaN, RANGE], [Infinity, RANGE], [1.5, RANGE], [2 ** 53, RANGE],
    ['1000', TYPE], [null, TYPE], [{}, TYPE],
  ]

  const badOptions = [
    [{ retryCount: -2 }, RANGE], [{ retryCount: 1.5 }, RANGE], [{ retryDelay: -1 }, RANGE],
    [{ retryDelay: 0.5 }, RANGE], [{ retryJitter: -5 }, RANGE], [{ waitTimeout: NaN }, RANGE],
    [{ maxHold: 0 }, RANGE], [{ renewInterval: 0 }, RANGE], [{ ttl: 100, renewInterval: 100 }, RANGE],
    [{ retryCount: '3' }, TYPE], [{ signal: {} }, TYPE], [{ onLost: 'x' }, TYPE], [{ autoRenew: 1 }, TYPE],
    ['fast', TYPE], [42, TYPE], [[], TYPE], [{ tll: 1000 }, VALUE],
  ]

  test('bad keys throw synchronously with Node\'s codes and touch nothing', async () => {
    const before = await redis.dbsize()
    for (const [key, code] of badKeys) {
      for (const call of [() => locks.acquire(key), () => locks.tryAcquire(key), () => locks.withLock(key, () => 1)]) {
        assert.throws(call, (e) => e.code === code, `${String(key).slice(0, 20)} -> ${code}`)
      }
    }
    assert.equal(await redis.dbsize(), before)
  })

  test('bad ttl values throw synchronously', () => {
    for (const [ttl, code] of badTtls) {
      assert.throws(() => locks.acquire('bad:ttl', { ttl }), (e) => e.code === code, `ttl ${ttl}`)
      assert.throws(() => new LockClient({ url: server.url, ttl }), (e) => e.code === code, `client ttl ${ttl}`)
    }
  })

  test('bad options throw synchronously; inherited properties are ignored', async () => {
    for (const [options, code] of badOptions) {
      assert.throws(() => locks.acquire('bad:opt', options), (e) => e.code === code, JSON.stringify(options))
    }
    const tricky = Object.create({ ttl: -1, retryCount: 'x' })
    const lock = await locks.acquire('bad:proto', tricky)
    assert.equal(lock.ttl, 30000, 'inherited ttl ignored')
    await lock.release()
    const polluted = JSON.parse('{"__proto__": {"ttl": -5}}')
    assert.throws(() => locks.acquire('bad:proto', polluted), { code: VALUE })
  })

  test('bad client options: malformed URL, unknown scheme, wrong types', () => {
    const cases = [
      [{ url: 'not a url' }, VALUE], [{ url: 'http://127.0.0.1:6379' }, VALUE], [{ url: 'redis://' + 'x'.repeat(10) + ':notaport' }, VALUE],
      [{ url: 42 }, TYPE], [{ nodes: 'redis://a' }, TYPE], [{ nodes: [] }, VALUE],
      [{ nodes: ['redis://127.0.0.1:1', 'redis://127.0.0.1:1'] }, VALUE],
      [{ driftFactor: -0.1 }, RANGE], [{ driftFactor: 0.9 }, RANGE], [{ connectTimeout: 0 }, RANGE],
      [{ keyPrefix: 5 }, TYPE], ['redis://127.0.0.1', TYPE],
      // Quorum members: a URL or { cluster: [seed URLs] }.
      [{ nodes: [42] }, TYPE], [{ nodes: [null] }, TYPE], [{ nodes: [['redis://127.0.0.1:1']] }, TYPE],
      [{ nodes: [{}] }, TYPE], [{ nodes: [{ cluster: 'redis://127.0.0.1:1' }] }, TYPE],
      [{ nodes: [{ cluster: ['redis://127.0.0.1:1', 7] }] }, TYPE], [{ nodes: [{ cluster: [] }] }, VALUE],
      [{ nodes: [{ cluster: ['redis://127.0.0.1:1'], url: 'redis://127.0.0.1:2' }] }, VALUE],
      [{ nodes: ['redis://127.0.0.1:1', { cluster: ['unix:///tmp/redis.sock'] }] }, VALUE],
      [{ nodes: ['redis://127.0.0.1:1', { cluster: ['redis://127.0.0.1:1', 'redis://127.0.0.1:2'] }] }, VALUE],
      [{ nodes: [{ cluster: ['redis://127.0.0.1:2'] }, { cluster: ['redis://127.0.0.1:2'] }] }, VALUE],
      [{ nodes: ['redis://127.0.0.1:1'], cluster: ['redis://127.0.0.1:2'] }, VALUE],
      [{ nodes: ['redis://127.0.0.1:1', { cluster: ['redis://127.0.0.1:2'] }], waitReplicas: 1 }, VALUE],
      [{ sentinel: { sentinels: [], name: 'm' } }, VALUE], [{ sentinel: { sentinels: ['redis://127.0.0.1:26379'] } }, TYPE],
      [{ sentinel: { sentinels: ['redis://127.0.0.1:26379'], name: 'm' }, url: 'redis://127.0.0.1:1' }, VALUE],
      [{ sentinel: { sentinels: ['redis://127.0.0.1:26379'], name: 'm', db: -1 } }, RANGE], [{ sentinel: [] }, TYPE],
    ]
    for (const [options, code] of cases) {
      assert.throws(() => new LockClient(options), (e) => e.code === code, JSON.stringify(options))
    }
    assert.throws(() => new LockClient({ url: 'redis://u:hunter2@127.0.0.1:notaport' }), (e) => !e.message.includes('hunter2'))
    // A valid mixed quorum: three lock nodes, a cluster named by its seeds; no I/O yet.
    const mixed = new LockClient({ nodes: ['redis://127.0.0.1:1', { cluster: ['redis://127.0.0.1:2', 'redis://127.0.0.1:3'] }, { cluster: ['redis://127.0.0.1:4'] }] })
    assert.deepEqual(mixed.nodes, ['127.0.0.1:1', 'cluster 127.0.0.1:2,127.0.0.1:3', 'cluster 127.0.0.1:4'])
    // Its locks keep their keys in one hash slot, checked before anything is sent.
    assert.throws(() => mixed.acquire(['order:1:pay', 'order:1:ship']), (e) => e.code === VALUE)
    return mixed.close()
  })

  test('withLock and extend argument errors', async () => {
    assert.throws(() => locks.withLock('k', 'not a function'), { code: TYPE })
    assert.throws(() => withLock('k'), { code: TYPE })
    assert.throws(() => withLock(42, 'k', () => 1), { code: TYPE })
    assert.throws(() => withLock({ nope: true }, 'k', () => 1), { code: VALUE })
    assert.throws(() => new DistributedLock(null, 'k'), { code: TYPE })
    assert.throws(() => new DistributedLock(server.url, ''), { code: VALUE })
    const lock = await locks.acquire('bad:extend')
    for (const [ttl, code] of badTtls) {
      assert.throws(() => lock.extend(ttl), (e) => e.code === code, `extend ${ttl}`)
    }
    assert.equal(lock.held, true)
    await lock.release()
  })

  test('fn that throws synchronously or rejects with a non-Error: lock released, error passed through', async () => {
    await assert.rejects(locks.withLock('bad:fn', () => { throw 'plain string' }), (e) => e === 'plain string')
    await assert.rejects(locks.withLock('bad:fn', () => Promise.reject(undefined)), (e) => e === undefined)
    assert.equal(await redis.exists('bad:fn'), 0)
  })

  test('binary-looking and Unicode keys round-trip exactly', async () => {
    for (const key of ['ключ:😀', 'a\u0000b', 'tab\tnew\nline', ' ']) {
      const lock = await locks.acquire(key)
      assert.equal(lock.key, key)
      assert.equal(await redis.get(key), lock.token)
      assert.equal(await lock.release(), true)
      assert.equal(await redis.exists(key), 0)
    }
  })

  test('a polluted Object.prototype does not change any lock', async () => {
    Object.prototype.ttl = 50 // eslint-disable-line no-extend-native
    Object.prototype.autoRenew = false // eslint-disable-line no-extend-native
    Object.prototype.retryCount = 0 // eslint-disable-line no-extend-native
    try {
      const c = new LockClient({ url: server.url })
      const lock = await c.acquire('bad:polluted')
      assert.equal(lock.ttl, 30000)
      assert.ok((await redis.pttl('bad:polluted')) > 29000)
      await new Promise((r) => setTimeout(r, 150))
      assert.equal(lock.held, true)
      await lock.release()
      await c.close()
    } finally {
      delete Object.prototype.ttl
      delete Object.prototype.autoRenew
      delete Object.prototype.retryCount
    }
  })

  test('semaphores: limit, permits and fn are checked synchronously with a code, on one node and on several', async () => {
    // Several nodes that are never reached: the arguments are refused before any I/O.
    const redlock = new LockClient({ nodes: ['redis://127.0.0.1:1', 'redis://127.0.0.1:2', 'redis://127.0.0.1:3'] })
    try {
      for (const c of [locks, redlock]) {
        for (const [limit, code] of [[0, RANGE], [-1, RANGE], [1.5, RANGE], [NaN, RANGE], [100001, RANGE], ['3', TYPE], [null, TYPE]]) {
          assert.throws(() => c.semaphore('bad:sem', { limit }), { code }, `limit ${limit}`)
        }
        assert.throws(() => c.semaphore('bad:sem', {}), { code: VALUE })
        const sem = c.semaphore('bad:sem', { limit: 3 })
        for (const [permits, code] of [[0, RANGE], [4, RANGE], [1.5, RANGE], [2.0000001, RANGE], [-1, RANGE], [NaN, RANGE], [Infinity, RANGE], ['2', TYPE], [null, TYPE], [2n, TYPE]]) {
          assert.throws(() => sem.acquire({ permits }), { code }, `acquire permits ${String(permits)}`)
          assert.throws(() => sem.tryAcquire({ permits }), { code }, `tryAcquire permits ${String(permits)}`)
          assert.throws(() => sem.withPermit(() => 1, { permits }), { code }, `withPermit permits ${String(permits)}`)
        }
        for (const fn of [undefined, null, 'fn', {}]) assert.throws(() => sem.withPermit(fn), { code: TYPE })
        assert.throws(() => sem.acquire({ ttl: 0 }), { code: RANGE })
      }
    } finally {
      await redlock.close()
    }
  })
})

describe('hostile or odd arguments', () => {
  let server
  let locks
  serverAndClient({ client: { ttl: 5000 } }, (s) => ({ server, locks } = s))

  test('a Proxy-wrapped key array and getters that change type are read once: a lock or a typed error', async () => {
    const proxied = new Proxy(['arg:p1', 'arg:p2'], {})
    const lock = await locks.acquire(proxied)
    assert.deepEqual(lock.keys, ['arg:p1', 'arg:p2'])
    await lock.release()

    let reads = 0
    const shifty = ['arg:g']
    Object.defineProperty(shifty, 0, { get: () => (reads++ === 0 ? 'arg:g' : 42), enumerable: true })
    const l2 = await locks.acquire(shifty)
    assert.equal(l2.key, 'arg:g')
    assert.equal(reads, 1, 'the element was read once')
    await l2.release()

    const badFirst = new Proxy(['x'], { get: (t, p) => (p === '0' ? 7 : Reflect.get(t, p)) })
    assert.throws(() => locks.acquire(badFirst), { code: 'ERR_INVALID_ARG_TYPE' })
    // A trap that throws: the caller gets its own error, synchronously (never an untyped napi one).
    const mine = new Error('no length for you')
    const throwing = new Proxy([], { get: (t, p) => { if (p === 'length') throw mine; return Reflect.get(t, p) } })
    assert.throws(() => locks.acquire(throwing), (e) => e === mine)

    let ttlReads = 0
    const opts = { get ttl() { return ttlReads++ === 0 ? 3000 : 'soon' } }
    const l3 = await locks.acquire('arg:opts', opts)
    assert.equal(l3.ttl, 3000)
    await l3.release()

    const nodes = new Proxy([server.url], {})
    const c = new LockClient({ nodes })
    const l4 = await c.acquire('arg:nodes')
    await l4.release()
    await c.close()
  })

  test('inspect and forceRelease throw synchronously for keys over the limit, like acquire', () => {
    const long = 'k'.repeat(64 * 1024 + 1)
    for (const call of [() => locks.acquire(long), () => locks.inspect(long), () => locks.forceRelease(long)]) {
      assert.throws(call, (e) => e instanceof RangeError && e.code === 'ERR_OUT_OF_RANGE' && /at most 65536 bytes long/.test(e.message))
    }
    const wide = 'é'.repeat(40 * 1024) // 80 KiB in UTF-8
    assert.throws(() => locks.inspect(wide), { code: 'ERR_OUT_OF_RANGE' })
  })

  test('one AbortSignal shared by many waiting acquires: one listener, no MaxListenersExceededWarning', async () => {
    const warnings = []
    const onWarning = (w) => warnings.push(w)
    process.on('warning', onWarning)
    const holder = await locks.acquire('arg:shared')
    try {
      const controller = new AbortController()
      const waits = Array.from({ length: 40 }, () => locks.acquire('arg:shared', { signal: controller.signal, retryDelay: 50 }))
      assert.ok(getEventListeners(controller.signal, 'abort').length <= 1, `${getEventListeners(controller.signal, 'abort').length} listeners`)
      controller.abort(new Error('enough'))
      const results = await Promise.allSettled(waits)
      for (const r of results) assert.equal(r.status === 'rejected' && r.reason.code, 'ERR_LOCK_ABORTED')
      // Settled acquires leave no listener behind on a signal that is still live.
      const live = new AbortController()
      const quick = await Promise.all(Array.from({ length: 20 }, (_, i) => locks.acquire(`arg:live:${i}`, { signal: live.signal })))
      assert.equal(getEventListeners(live.signal, 'abort').length, 0)
      await Promise.all(quick.map((l) => l.release()))
      await new Promise((r) => setImmediate(r))
      assert.deepEqual(warnings.map(String), [])
    } finally {
      process.off('warning', onWarning)
      await holder.release()
    }
  })

  test('unknown nested options are rejected like unknown top-level ones', () => {
    assert.throws(() => new LockClient({ url: server.url, tls: { rejectUnauthorized: false } }), (e) =>
      e.code === 'ERR_INVALID_ARG_VALUE' && /options\.tls\.rejectUnauthorized/.test(e.message) && /known: ca, cert, key/.test(e.message))
    assert.throws(() => new LockClient({ url: server.url, tlss: {} }), { code: 'ERR_INVALID_ARG_VALUE' })
  })
})
