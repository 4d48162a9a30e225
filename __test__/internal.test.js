'use strict'

// The helpers the client, locks, semaphores and read-write locks share
// (lib/internal.js) and a client's table of live Locks (lib/lock.js), without Redis.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { linkSignal, takenAsNull, settledWithin, abortedError } = require('../lib/internal')
const { LiveLocks } = require('../lib/lock')
const { LockError } = require('../lib/errors')

test('linkSignal: one abort listener per signal, every linked handle cancelled once', () => {
  const controller = new AbortController()
  let listeners = 0
  const add = controller.signal.addEventListener.bind(controller.signal)
  controller.signal.addEventListener = (...args) => {
    listeners++
    return add(...args)
  }
  const cancelled = []
  const handle = (name) => ({ cancel: () => cancelled.push(name) })
  linkSignal(controller.signal, handle('a'))
  const unlinkB = linkSignal(controller.signal, handle('b'))
  linkSignal(controller.signal, handle('c'))
  unlinkB()
  assert.equal(listeners, 1)
  controller.abort()
  controller.abort()
  assert.deepEqual(cancelled, ['a', 'c'])
})

test('linkSignal: the last unlink removes the listener, a later link adds a new one', () => {
  const controller = new AbortController()
  const cancelled = []
  const unlink = linkSignal(controller.signal, { cancel: () => cancelled.push('first') })
  unlink()
  linkSignal(controller.signal, { cancel: () => cancelled.push('second') })
  controller.abort()
  assert.deepEqual(cancelled, ['second'])
})

test('takenAsNull: ERR_LOCK_TAKEN resolves null, every other rejection passes through', async () => {
  assert.equal(await takenAsNull(Promise.reject(new LockError('ERR_LOCK_TAKEN', 'held'))), null)
  assert.equal(await takenAsNull(Promise.resolve('lock')), 'lock')
  await assert.rejects(takenAsNull(Promise.reject(new LockError('ERR_LOCK_TIMEOUT', 'late'))), { code: 'ERR_LOCK_TIMEOUT' })
})

test('settledWithin: resolves when the promises settle, or after the bound', async () => {
  const start = performance.now()
  await settledWithin([Promise.reject(new Error('x')), Promise.resolve(1)], 5000)
  assert.ok(performance.now() - start < 1000)
  const never = new Promise(() => {})
  const t = performance.now()
  await settledWithin([never], 50)
  assert.ok(performance.now() - t >= 40)
})

test('LiveLocks: take finds a lock once; iteration yields the locks still registered', () => {
  const live = new LiveLocks()
  const a = { name: 'a' }
  const b = { name: 'b' }
  live.add(1, a)
  live.add(2, b)
  assert.equal(live.take(1), a)
  assert.equal(live.take(1), undefined)
  live.delete(2)
  assert.deepEqual([...live], [])
  live.add(3, b)
  assert.deepEqual([...live], [b])
})

test('the one error JS makes from its own state (an aborted signal) carries its code', () => {
  const reason = new Error('stop')
  const aborted = abortedError(['k'], { reason })
  assert.equal(aborted.code, 'ERR_LOCK_ABORTED')
  assert.equal(aborted.name, 'AbortError')
  assert.equal(aborted.cause, reason)
})
