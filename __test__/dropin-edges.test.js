'use strict'

// The drop-ins at their edges: every argument error has a stable code, inspect
// output never prints a client's secrets, and the module-level withLock names
// a bad key as the key.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const util = require('node:util')
const Redis = require('ioredis')
const Redlock = require('../redlock')
const { withLock } = require('..')
const { startRedis } = require('./helpers')

let server
before(async () => {
  server = await startRedis()
})
after(async () => {
  await server.stop()
})

test('redlock drop-in: a duration that is not a number, and a threshold too close to it, have codes', async () => {
  const redlock = new Redlock([server.url])
  try {
    await assert.rejects(redlock.using(['edge:k'], Symbol('d'), async () => {}), (e) => {
      assert.equal(e.code, 'ERR_INVALID_ARG_TYPE')
      assert.equal(e.message, 'Duration must be an integer value in milliseconds.')
      return true
    })
    await assert.rejects(redlock.acquire(['edge:k'], 10n), (e) => e.code === 'ERR_INVALID_ARG_TYPE')
    await assert.rejects(redlock.extend(new Redlock.Lock(redlock, ['edge:k'], 'v', [], Date.now() + 1000), '5'), (e) => e.code === 'ERR_INVALID_ARG_TYPE')
    await assert.rejects(redlock.using(['edge:k'], 500, async () => {}), (e) => {
      assert.equal(e.code, 'ERR_INVALID_ARG_VALUE')
      assert.match(e.message, /automaticExtensionThreshold/)
      return true
    })
  } finally {
    await redlock.quit()
  }
})

test('util.inspect of a drop-in ExecutionError, Lock and Redlock never prints a client\'s password', async () => {
  const secret = 'hunter2-very-secret'
  const holderClient = new Redis({ host: '127.0.0.1', port: server.port })
  const holder = new Redlock([holderClient], { retryCount: 0 })
  const client = new Redis({ host: '127.0.0.1', port: server.port })
  // The client as a user's would be, with credentials in its options (the
  // test server has none, so the connection itself does not use them).
  client.options.password = secret
  client.options.username = 'default'
  const redlock = new Redlock([{ host: '127.0.0.1', port: server.port }], { retryCount: 1, retryDelay: 5, retryJitter: 0 })
  // Votes are keyed by the clients given: a second Redlock over the ioredis client itself.
  const withClient = new Redlock([client], { retryCount: 1, retryDelay: 5, retryJitter: 0 })
  try {
    const held = await holder.acquire(['edge:inspect'], 5000)
    const err = await withClient.acquire(['edge:inspect'], 1000).catch((e) => e)
    assert.ok(err instanceof Redlock.ExecutionError)
    await Promise.all(err.attempts)
    await new Promise((r) => setImmediate(r))
    const shown = util.inspect(err, { depth: Infinity })
    assert.ok(!shown.includes(secret), 'the ExecutionError printed the password')
    // redlock's shape: the attempts with their votes, the client by its address.
    assert.match(shown, /votesAgainst: Map\(1\) \{\s+\[client 127\.0\.0\.1:\d+\] => ResourceLockedError/)
    assert.match(shown, /ERR_LOCK_QUORUM/)
    const lock = await withClient.acquire(['edge:inspect:2'], 1000)
    await Promise.all(lock.attempts)
    assert.ok(!util.inspect(lock, { depth: Infinity }).includes(secret), 'the Lock printed the password')
    assert.ok(!util.inspect(withClient, { depth: Infinity }).includes(secret), 'the Redlock printed the password')
    await lock.release()
    await held.release()
  } finally {
    await Promise.all([holder.quit(), redlock.quit(), withClient.quit()])
  }
})

test('module-level withLock(42, fn) says the key is invalid', () => {
  assert.throws(() => withLock(42, async () => {}), (e) => {
    assert.equal(e.code, 'ERR_INVALID_ARG_TYPE')
    assert.match(e.message, /"key"/)
    assert.doesNotMatch(e.message, /Received function/)
    return true
  })
  assert.throws(() => withLock({}, async () => {}), (e) => /"key"/.test(e.message))
})
