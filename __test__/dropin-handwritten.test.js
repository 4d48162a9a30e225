'use strict'

const { test, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { DistributedLock, withLock, LockClient } = require('lockdog')
const { serverAndClient, runWorker, waitFor } = require('./helpers')
const { freePort } = require('../scripts/local-redis')

let server
let redis

serverAndClient({}, (s) => ({ server, redis } = s))

test('the article\'s withLock(redis, key, fn, ttl) and DistributedLock code runs unchanged; the job outlasts the TTL', async () => {
  const ttl = 400
  const job = 1300
  const events = []
  const probe = new Redis({ host: '127.0.0.1', port: server.port })
  const rival = new DistributedLock(probe, 'order:1001:pay', ttl)
  const worker = runWorker('seed-article.js', [], {
    env: { REDIS_PORT: server.port, LOCK_TTL: ttl, JOB_MS: job },
    onLine: (l) => events.push(l.event),
  })
  await waitFor(() => events.includes('paying'), { what: 'the payment to start' })
  // The payment runs 3x longer than the TTL: the lock must stay put throughout.
  const end = performance.now() + job - 200
  let checks = 0
  while (performance.now() < end) {
    assert.ok(await redis.exists('order:1001:pay'), 'lock present during the job')
    assert.equal(await rival.acquire(), false, 'nobody else can take it')
    checks++
    await new Promise((r) => setTimeout(r, 100))
  }
  assert.ok(checks >= 5)
  await waitFor(() => events.includes('refund-locked'), { what: 'the refund lock', timeout: 5000 })
  assert.equal(await rival.acquire(), true, 'released after withLock')
  await rival.release()
  const result = await worker.exited
  assert.equal(result.code, 0, result.stderr)
  assert.deepEqual(events, ['paying', 'refund-locked', 'done'])
  assert.equal(await redis.exists('order:1001:pay', 'order:1001:refund'), 0)
  probe.disconnect()
})

test('withLock(redis, ...) fails at once when the lock is held (one attempt, like the article)', async () => {
  const probe = new Redis({ host: '127.0.0.1', port: server.port })
  const holder = new DistributedLock(probe, 'seed:busy', 5000)
  assert.equal(await holder.acquire(), true)
  await assert.rejects(withLock(probe, 'seed:busy', async () => 1), { code: 'ERR_LOCK_TAKEN' })
  assert.equal(await holder.release(), true)
  assert.equal(await withLock(probe, 'seed:busy', async () => 'ok'), 'ok')
  probe.disconnect()
})

test('ioredis options are honoured: db, password-less, keyPrefix', async () => {
  const io = new Redis({ host: '127.0.0.1', port: server.port, db: 3, keyPrefix: 'app:' })
  const lock = new DistributedLock(io, 'job', 2000)
  assert.equal(await lock.acquire(), true)
  const db3 = new Redis({ host: '127.0.0.1', port: server.port, db: 3 })
  assert.equal(await db3.get('app:job'), lock.token)
  assert.equal(await redis.exists('app:job'), 0, 'not in db 0')
  await lock.release()
  assert.equal(await db3.exists('app:job'), 0)
  db3.disconnect()
  io.disconnect()
})

test('node-redis clients (url or socket options) and plain URLs work too', async () => {
  const byUrl = createClient({ url: `redis://127.0.0.1:${server.port}/2` })
  const bySocket = createClient({ socket: { host: '127.0.0.1', port: server.port }, database: 4 })
  for (const [client, db] of [[byUrl, 2], [bySocket, 4], [`redis://127.0.0.1:${server.port}/5`, 5]]) {
    const lock = new DistributedLock(client, 'nr:job', 2000)
    assert.equal(await lock.acquire(), true)
    const check = new Redis({ host: '127.0.0.1', port: server.port, db })
    assert.equal(await check.get('nr:job'), lock.token)
    assert.equal(await lock.release(), true)
    check.disconnect()
  }
  const out = await withLock(`redis://127.0.0.1:${server.port}`, 'nr:with', async () => 'done', 1000)
  assert.equal(out, 'done')
  const locks = new LockClient({ url: server.url })
  assert.equal(await withLock(locks, 'nr:with', () => 'via LockClient'), 'via LockClient')
  await locks.close()
})

test('module-level withLock(key, fn) uses REDIS_URL', async () => {
  const r = runWorker('default-client.js', [], { env: { REDIS_URL: server.url } })
  const result = await r.exited
  assert.equal(result.code, 0, result.stderr)
  assert.deepEqual(result.lines[0], { value: 42, held: true })
  assert.doesNotMatch(result.stderr, /LOCKDOG_NODE_FAILED/)
})

test('module-level withLock with no Redis at REDIS_URL: one process warning at the first failure, then the typed error at waitTimeout', async () => {
  const port = await freePort()
  const r = runWorker('default-client-unreachable.js', [1500], { env: { REDIS_URL: `redis://127.0.0.1:${port}` } })
  const result = await r.exited
  assert.equal(result.code, 0, result.stderr)
  const [out] = result.lines
  assert.equal(out.code, 'ERR_LOCK_CONNECTION', JSON.stringify(out))
  assert.match(out.message, new RegExp(`127\\.0\\.0\\.1:${port}`))
  assert.ok(out.ms >= 1400, `gave up after ${out.ms} ms, before its waitTimeout`)
  const warnings = result.stderr.match(/\[LOCKDOG_NODE_FAILED\] LockdogWarning: [^\n]*/g) ?? []
  assert.equal(warnings.length, 1, result.stderr)
  assert.match(warnings[0], new RegExp(`127\\.0\\.0\\.1:${port}.*set REDIS_URL`))
})

test('ESM import works', async () => {
  const m = await import('lockdog')
  assert.equal(typeof m.LockClient, 'function')
  assert.equal(m.LockClient, LockClient)
  assert.equal(typeof m.default.withLock, 'function')
})
