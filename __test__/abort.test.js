'use strict'

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { LockError } = require('..')
const { serverAndClient } = require('./helpers')

let redis
let locks

serverAndClient({ client: {} }, (s) => ({ redis, locks } = s))

test('an AbortSignal cancels a waiting acquire: ERR_LOCK_ABORTED named AbortError, holder untouched', async () => {
  const holder = await locks.acquire('ab:a', { ttl: 5000 })
  const ac = new AbortController()
  const waiting = locks.acquire('ab:a', { signal: ac.signal, retryDelay: 20, waitTimeout: 10000 })
  setTimeout(() => ac.abort(new Error('user gave up')), 120)
  const t0 = performance.now()
  await assert.rejects(waiting, (e) => {
    assert.ok(e instanceof LockError)
    assert.equal(e.code, 'ERR_LOCK_ABORTED')
    assert.equal(e.name, 'AbortError')
    assert.equal(e.cause.message, 'user gave up')
    return true
  })
  assert.ok(performance.now() - t0 < 1000)
  assert.equal(await redis.get('ab:a'), holder.token)
  await holder.release()
})

test('an already aborted signal rejects at once and sends nothing', async () => {
  const before = locks.stats()
  await assert.rejects(locks.acquire('ab:b', { signal: AbortSignal.abort() }), { code: 'ERR_LOCK_ABORTED', name: 'AbortError' })
  assert.equal(await redis.exists('ab:b'), 0)
  assert.deepEqual(locks.stats(), before)
})

test('aborting after the lock was taken does not affect the held lock', async () => {
  const ac = new AbortController()
  const lock = await locks.acquire('ab:c', { signal: ac.signal })
  ac.abort()
  assert.equal(lock.held, true)
  assert.equal(await lock.release(), true)
})

test('a user\'s own abort listener and onabort handler are left alone', async () => {
  const ac = new AbortController()
  let handler = 0
  ac.signal.onabort = () => handler++
  const lock = await locks.acquire('ab:d', { signal: ac.signal })
  ac.abort()
  assert.equal(handler, 1)
  await lock.release()
})
