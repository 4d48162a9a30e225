'use strict'

// Hostile or odd arguments: read once, typed errors, thrown synchronously, and no
// listener leak on a shared AbortSignal.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { getEventListeners } = require('node:events')
const { LockClient } = require('..')
const { startRedis } = require('./helpers')

let server
let locks

before(async () => {
  server = await startRedis()
  locks = new LockClient({ url: server.url, ttl: 5000 })
})

after(async () => {
  await locks.close()
  await server.stop()
})

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
