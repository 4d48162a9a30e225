'use strict'

// Events and a lock's loss carry the error the native layer built: the 'lost'
// event's LockError is the one onLost, the signal, lossError and
// diagnostics_channel see; a node's fault reaches 'error' as ERR_LOCK_REDIS
// (an error reply) or ERR_LOCK_CONNECTION (no answer). Without the JS facade
// (no error class registered) the same arrive as plain Errors.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const diagnostics = require('node:diagnostics_channel')
const { execFileSync } = require('node:child_process')
const { LockClient, LockError } = require('..')
const binding = require('../binding.js')

const { NativeClient } = binding
const { serverAndClient, startRedis, waitFor, aborted, ROOT } = require('./helpers')

let server
let redis

serverAndClient({}, (s) => ({ server, redis } = s))

/** A LockError built natively: no JS frames, a message in words. */
function assertNativeLockError(err, code) {
  assert.ok(err instanceof LockError, String(err))
  assert.equal(err.code, code, err.message)
  assert.equal(err.name, 'LockError')
  assert.equal(typeof err.attempts, 'number')
  assert.ok(Array.isArray(err.nodes))
  assert.ok(err.stack.startsWith(`LockError: ${err.message}`), err.stack)
  assert.doesNotMatch(err.message, /[{}]/, err.message)
}

/** What a node's fault reads as: one report, named in the message. */
function assertNodeFault(err, node) {
  assert.equal(err.key, undefined)
  assert.equal(err.attempts, 0)
  assert.equal(err.nodes.length, 1)
  assert.deepEqual(Object.keys(err.nodes[0]).sort(), ['answer', 'detail', 'node'])
  assert.equal(err.nodes[0].node, node)
  assert.equal(err.message, `Redis at ${node}: ${err.nodes[0].detail}`)
}

test("a loss found by a renewal: one LockError in 'lost', onLost, the signal, lossError and lockdog:lost", async () => {
  const locks = new LockClient({ url: server.url })
  const events = []
  locks.on('lost', (err, lock) => events.push({ err, lock }))
  const published = []
  const onPublish = (msg) => published.push(msg)
  diagnostics.subscribe('lockdog:lost', onPublish)
  try {
    const onLost = []
    const lock = await locks.acquire('native-events:lost', { ttl: 600, onLost: (err) => onLost.push(err) })
    const { signal } = lock
    await redis.del('native-events:lost')
    await aborted(signal)
    await waitFor(() => events.length === 1, { what: "the 'lost' event" })
    const { err } = events[0]
    assertNativeLockError(err, 'ERR_LOCK_LOST')
    assert.equal(err.key, 'native-events:lost')
    assert.equal(events[0].lock, lock)
    assert.equal(signal.reason, err, 'the signal aborts with the same error')
    assert.deepEqual(onLost, [err])
    assert.equal(lock.lossError, err)
    assert.equal(published.length, 1)
    assert.equal(published[0].error, err)
    assert.equal(published[0].key, 'native-events:lost')
    assert.equal(lock.status, 'lost')
  } finally {
    diagnostics.unsubscribe('lockdog:lost', onPublish)
    await locks.close()
  }
})

test('a lease that ran out: lossError is the LockError of the native lock, built where it is read', async () => {
  const locks = new LockClient({ url: server.url })
  const native = new NativeClient({ url: server.url })
  try {
    const lock = await locks.acquire('native-events:expired', { ttl: 200, autoRenew: false })
    await waitFor(() => !lock.held, { what: 'the lease to run out' })
    assert.equal(lock.status, 'lost')
    const err = lock.lossError
    assert.ok(err instanceof LockError, String(err))
    assert.equal(err.code, 'ERR_LOCK_LOST')
    assert.equal(err.key, 'native-events:expired')
    assert.match(err.message, /validity ran out/)
    assert.equal(await lock.release(), false)

    const held = await native.acquire(['native-events:read'], { ttl: 200, autoRenew: false })
    assert.equal(binding.lockLoss(held), null)
    await waitFor(() => !binding.lockHeld(held), { what: 'the lease to run out' })
    const read = binding.lockLoss(held)
    assert.ok(read instanceof LockError, String(read))
    assert.equal(read.code, 'ERR_LOCK_LOST')
    assert.equal(read.key, 'native-events:read')
    assert.match(read.stack, /native-events\.test\.js/, read.stack)
  } finally {
    await native.close()
    await locks.close()
  }
})

test("a node that answers with an error reply: 'error' with ERR_LOCK_REDIS", async () => {
  await redis.call('ACL', 'SETUSER', 'native-events', 'on', '>secret', '~*', '&*', '+@all')
  const locks = new LockClient({ url: `redis://native-events:secret@127.0.0.1:${server.port}` })
  const errors = []
  locks.on('error', (err) => errors.push(err))
  try {
    const lock = await locks.acquire('native-events:noperm', { ttl: 600 })
    await redis.call('ACL', 'SETUSER', 'native-events', '-evalsha', '-eval')
    await waitFor(() => errors.length > 0, { what: "the renewal's error reply" })
    const err = errors[0]
    assertNativeLockError(err, 'ERR_LOCK_REDIS')
    assertNodeFault(err, locks.nodes[0])
    assert.equal(err.nodes[0].answer, 'error')
    assert.match(err.message, /NOPERM/)
    assert.doesNotMatch(err.message, /secret/)
    await redis.call('ACL', 'SETUSER', 'native-events', '+@all')
    await lock.release()
  } finally {
    await locks.close()
    await redis.call('ACL', 'DELUSER', 'native-events')
  }
})

test("a node that stops answering: 'error' with ERR_LOCK_CONNECTION", async () => {
  const own = await startRedis()
  const locks = new LockClient({ url: own.url, commandTimeout: 100, connectTimeout: 100 })
  const errors = []
  locks.on('error', (err) => errors.push(err))
  try {
    await locks.acquire('native-events:down', { ttl: 900 })
    await own.kill()
    await waitFor(() => errors.length > 0, { what: "the renewal's fault" })
    const err = errors[0]
    assertNativeLockError(err, 'ERR_LOCK_CONNECTION')
    assertNodeFault(err, locks.nodes[0])
    assert.ok(['timeout', 'unreachable'].includes(err.nodes[0].answer), err.nodes[0].answer)
  } finally {
    await locks.close()
    await own.stop()
  }
})

test('without a registered error class, the binding hands over plain Errors with the same code and detail', () => {
  // Only binding.js is loaded: lib/errors.js, which registers LockError, never runs.
  const script = `
    const binding = require('./binding.js')
    const { NativeClient } = binding
    const seen = []
    const describe = (e) => ({ error: e instanceof Error, name: e.name, code: e.code, message: e.message, key: e.key, nodes: e.nodes, attempts: e.attempts })
    const native = new NativeClient({ url: process.argv[1] }, (kind, id, detail) => { if (kind === 'lost') seen.push(describe(detail)) })
    ;(async () => {
      const lock = await native.acquire(['native-events:plain'], { ttl: 300 })
      const removed = await native.forceRelease('native-events:plain')
      while (seen.length === 0) await new Promise((r) => setTimeout(r, 20))
      const loss = describe(binding.lockLoss(lock))
      await native.close()
      console.log(JSON.stringify({ removed, event: seen[0], loss }))
    })().catch((e) => { console.error(e); process.exit(1) })
  `
  const out = JSON.parse(execFileSync(process.execPath, ['-e', script, server.url], { cwd: ROOT, encoding: 'utf8', timeout: 20000 }))
  assert.equal(out.removed, 1)
  for (const what of ['event', 'loss']) {
    const e = out[what]
    assert.equal(e.error, true, what)
    assert.equal(e.name, 'LockError', what)
    assert.equal(e.code, 'ERR_LOCK_LOST', what)
    assert.equal(e.key, 'native-events:plain', what)
    assert.ok(Array.isArray(e.nodes), what)
  }
})
