'use strict'

const { test, after } = require('node:test')
const assert = require('node:assert/strict')
const { LockClient } = require('..')
const { serverAndClient, startRedis, inspector, waitFor, sleep, freePort } = require('./helpers')

let server
let redis

serverAndClient({}, (s) => ({ server, redis } = s))

test('NOSCRIPT after SCRIPT FLUSH: release, extend and renewals reload the scripts', async () => {
  const locks = new LockClient({ url: server.url })
  const a = await locks.acquire('ns:a', { ttl: 900 })
  await redis.script('FLUSH')
  // The watchdog renews through a pipelined EVALSHA: it must reload and keep the lock.
  const renewed = locks.stats().renewed
  await waitFor(() => locks.stats().renewed >= renewed + 2, { what: 'two renewals after the flush' })
  assert.equal(a.held, true)
  assert.equal(locks.stats().lost, 0)
  assert.equal(await redis.get('ns:a'), a.token)
  await redis.script('FLUSH')
  await a.extend(2000)
  assert.ok((await redis.pttl('ns:a')) > 1500)
  await redis.script('FLUSH')
  assert.equal(await a.release(), true)
  await redis.script('FLUSH')
  const b = await locks.acquire('ns:b')
  assert.equal(await redis.get('ns:b'), b.token)
  await b.release()
  assert.equal(locks.stats().lost, 0)
  await locks.close()
})

test('CLIENT KILL: the connection comes back and no lock is falsely lost', async () => {
  const locks = new LockClient({ url: server.url })
  const lock = await locks.acquire('ck:a', { ttl: 600 })
  for (let i = 0; i < 5; i++) {
    await redis.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
    await sleep(150)
  }
  assert.equal(lock.held, true)
  assert.equal(locks.stats().lost, 0)
  assert.equal(await redis.get('ck:a'), lock.token)
  const other = await locks.acquire('ck:b')
  assert.equal(await other.release(), true)
  assert.equal(await lock.release(), true)
  await locks.close()
})

test('Redis down at acquire: ERR_LOCK_CONNECTION within the connect timeout, naming host:port only', async () => {
  const port = await freePort()
  const locks = new LockClient({ url: `redis://user:s3cret@127.0.0.1:${port}`, connectTimeout: 300 })
  const t0 = performance.now()
  await assert.rejects(locks.acquire('down:a', { retryCount: 0 }), (e) => {
    assert.equal(e.code, 'ERR_LOCK_CONNECTION')
    assert.match(e.message, new RegExp(`127\\.0\\.0\\.1:${port}`))
    assert.doesNotMatch(e.message + JSON.stringify(e.nodes), /s3cret/)
    return true
  })
  assert.ok(performance.now() - t0 < 300 + 500)
  await locks.close()
})

test('a node that does not answer (SIGSTOP): acquire fails within connect/command timeouts, no hang', async () => {
  const own = await startRedis()
  const locks = new LockClient({ url: own.url, commandTimeout: 200, connectTimeout: 200 })
  const warm = await locks.acquire('stop:warm')
  await warm.release()
  own.pause()
  const t0 = performance.now()
  await assert.rejects(locks.acquire('stop:a', { retryCount: 0 }), { code: 'ERR_LOCK_CONNECTION' })
  assert.ok(performance.now() - t0 < 1000)
  own.resume()
  const r = inspector(own)
  await waitFor(async () => (await r.exists('stop:a')) === 0, { what: 'no ghost key after the timed-out attempt', timeout: 3000 })
  const lock = await locks.acquire('stop:a')
  assert.equal(await lock.release(), true)
  r.disconnect()
  await locks.close()
  await own.stop()
})

test('Redis restarted empty while a lock is held: loss is signalled', async () => {
  const own = await startRedis()
  const locks = new LockClient({ url: own.url, connectTimeout: 300, commandTimeout: 300 })
  const lock = await locks.acquire('restart:a', { ttl: 900 })
  await own.restart()
  await new Promise((resolve) => lock.signal.addEventListener('abort', resolve, { once: true }))
  assert.equal(lock.signal.reason.code, 'ERR_LOCK_LOST')
  const again = await locks.acquire('restart:a', { waitTimeout: 3000 })
  assert.equal(await again.release(), true)
  await locks.close()
  await own.stop()
})
