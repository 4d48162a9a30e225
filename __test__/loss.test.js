'use strict'

// A loss is never silent: a release that finds the key gone or another owner's
// is reported like a loss found by a renewal, and close() ends running work
// (its signal aborts) before it gives any lock away.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { LockClient, LockError } = require('..')
const { serverAndClient, waitFor, aborted, startRedis, inspector } = require('./helpers')

let server
let redis

serverAndClient({}, (s) => ({ server, redis } = s))

/** A client whose 'lost' events are recorded. */
function client(options = {}) {
  const c = new LockClient({ url: server.url, ttl: 30000, ...options })
  c.lostEvents = []
  c.on('lost', (err, lock) => c.lostEvents.push({ err, lock }))
  return c
}

test('withLock: the key deleted and taken by another client while fn runs rejects ERR_LOCK_LOST with fn\'s result as cause', async () => {
  const a = client()
  const b = client()
  const onLost = []
  let signal
  let other
  try {
    const p = a.withLock('loss:del', async (s, lock) => {
      signal = s
      // The long ttl: the watchdog's next renewal is 10 s away; only the release can tell.
      assert.equal(await redis.del('loss:del'), 1)
      other = await b.acquire('loss:del')
      assert.equal(s.aborted, false)
      return 'fn result'
    }, { onLost: (err, lock) => onLost.push({ err, lock }) })
    const err = await p.then(() => assert.fail('withLock resolved although the lock had been taken'), (e) => e)
    assert.ok(err instanceof LockError, String(err))
    assert.equal(err.code, 'ERR_LOCK_LOST')
    assert.equal(err.cause, 'fn result')
    assert.equal(err.key, 'loss:del')
    assert.match(err.message, /on release its key was gone or held by another owner/)
    assert.equal(signal.aborted, true, 'the signal aborts')
    assert.equal(signal.reason.code, 'ERR_LOCK_LOST')
    assert.equal(onLost.length, 1, 'onLost ran once')
    assert.equal(onLost[0].err.code, 'ERR_LOCK_LOST')
    assert.equal(a.lostEvents.length, 1, "'lost' emitted once")
    assert.equal(a.lostEvents[0].lock, onLost[0].lock)
    assert.equal(onLost[0].lock.status, 'lost')
    assert.equal(await redis.get('loss:del'), other.token, "the other client's lock is untouched")
  } finally {
    if (other) await other.release()
    await a.close()
    await b.close()
  }
})

test('withLock: fn\'s error is the cause when the release finds the key gone; a foreign value counts too', async () => {
  const a = client()
  try {
    const boom = new Error('fn failed')
    const err = await a.withLock('loss:err', async () => {
      await redis.del('loss:err')
      throw boom
    }).catch((e) => e)
    assert.equal(err.code, 'ERR_LOCK_LOST')
    assert.equal(err.cause, boom)

    const foreign = await a.withLock('loss:foreign', async () => {
      await redis.set('loss:foreign', 'someone-else', 'PX', 5000)
      return 7
    }).catch((e) => e)
    assert.equal(foreign.code, 'ERR_LOCK_LOST')
    assert.equal(foreign.cause, 7)
    assert.equal(await redis.get('loss:foreign'), 'someone-else')
    assert.equal(a.lostEvents.length, 2)
  } finally {
    await redis.del('loss:foreign')
    await a.close()
  }
})

test('lock.release() keeps resolving false when the key is gone, and reports the loss once', async () => {
  const a = client()
  const onLost = []
  try {
    const lock = await a.acquire('loss:release', { onLost: (err) => onLost.push(err) })
    const { signal } = lock
    await redis.del('loss:release')
    assert.equal(await lock.release(), false)
    assert.equal(lock.status, 'lost')
    assert.equal(lock.lossError.code, 'ERR_LOCK_LOST')
    assert.match(lock.lossError.message, /on release its key was gone or held by another owner/)
    assert.equal(signal.aborted, true)
    assert.equal(signal.reason, lock.lossError, 'one error: the signal\'s, onLost\'s, the event\'s')
    assert.equal(onLost.length, 1)
    assert.equal(onLost[0], lock.lossError)
    assert.equal(a.lostEvents.length, 1)
    assert.equal(a.stats().lost, 1, 'a loss a release found counts as one')
    assert.equal(a.stats().released, 0)
    assert.equal(await lock.release(), false, 'a second release')
    assert.equal(onLost.length, 1, 'reported once')
    assert.equal(a.lostEvents.length, 1)
    // A normal release reports nothing.
    const ok = await a.acquire('loss:release', { onLost: (err) => onLost.push(err) })
    assert.equal(await ok.release(), true)
    assert.equal(await ok.release(), false)
    assert.equal(ok.status, 'released')
    assert.equal(ok.signal.aborted, false)
    assert.equal(onLost.length, 1)
    assert.equal(a.lostEvents.length, 1)
    assert.equal(await a.withLock('loss:release', async () => 'fine'), 'fine')
    assert.equal(a.lostEvents.length, 1)
  } finally {
    await a.close()
  }
})

test('a lock whose validity ran out and whose key is gone is lost for its validity, reported once', async () => {
  const a = client()
  try {
    const gone = await a.acquire('loss:late', { ttl: 300, autoRenew: false })
    await waitFor(() => !gone.held, { what: 'the validity to run out locally' })
    await redis.del('loss:late')
    assert.equal(await gone.release(), false)
    assert.equal(gone.status, 'lost')
    assert.match(gone.lossError.message, /its validity ran out/)
    assert.equal(a.lostEvents.length, 1)
  } finally {
    await a.close()
  }
})

test('close() during withLock: the signal aborts with ERR_LOCK_CLOSED before the lock is given away; withLock rejects', async () => {
  const a = client()
  const b = client()
  const onLost = []
  let abortedAt = null
  let started
  const running = new Promise((resolve) => { started = resolve })
  try {
    const work = a.withLock('close:run', async (signal) => {
      started()
      await aborted(signal)
      abortedAt = performance.now()
      assert.equal(signal.reason.code, 'ERR_LOCK_CLOSED')
      return 'stopped'
    }, { onLost: (err) => onLost.push(err) })
    await running
    // Another client waits for the key the whole time.
    const waiting = b.acquire('close:run', { retryDelay: 5, retryJitter: 5 }).then((lock) => ({ lock, at: performance.now() }))
    const closed = a.close()
    assert.equal(a.closed, true)
    const err = await work.catch((e) => e)
    assert.equal(err.code, 'ERR_LOCK_CLOSED')
    assert.equal(err.cause, 'stopped')
    await closed
    const got = await waiting
    assert.ok(abortedAt !== null && abortedAt <= got.at, 'the other client got the lock only after the signal aborted')
    assert.equal(onLost.length, 1)
    assert.equal(onLost[0].code, 'ERR_LOCK_CLOSED')
    assert.equal(a.lostEvents.length, 0, 'close is not a loss found on Redis')
    await got.lock.release()
    await assert.rejects(a.acquire('close:run'), { code: 'ERR_LOCK_CLOSED' })
  } finally {
    await a.close()
    await b.close()
  }
})

test('close({ graceful }) lets running withLock calls finish first, up to the bound', async () => {
  const a = client()
  try {
    let signalSeen
    const quick = a.withLock('close:quick', async (signal) => {
      signalSeen = signal
      await new Promise((r) => setTimeout(r, 150))
      return 'done'
    })
    await waitFor(() => signalSeen, { what: 'fn to start' })
    const closed = a.close({ graceful: 5000 })
    await assert.rejects(a.acquire('close:other'), { code: 'ERR_LOCK_CLOSED' }, 'no new locks while closing')
    assert.equal(await quick, 'done')
    assert.equal(signalSeen.aborted, false, 'finished within the bound: never aborted')
    await closed
    assert.equal(await redis.exists('close:quick'), 0)

    const b = client()
    let slowSignal
    const slow = b.withLock('close:slow', async (signal) => {
      slowSignal = signal
      await aborted(signal)
      return 'interrupted'
    })
    await waitFor(() => slowSignal, { what: 'fn to start' })
    const t0 = performance.now()
    await b.close({ graceful: 200 })
    const took = performance.now() - t0
    assert.ok(took >= 190 && took < 3000, `close waited ${Math.round(took)} ms for a 200 ms bound`)
    assert.equal(slowSignal.reason.code, 'ERR_LOCK_CLOSED')
    await assert.rejects(slow, (e) => e.code === 'ERR_LOCK_CLOSED' && e.cause === 'interrupted')
    assert.equal(await redis.exists('close:slow'), 0)
    assert.throws(() => b.close({ graceful: -1 }), { code: 'ERR_OUT_OF_RANGE' })
    assert.throws(() => b.close({ gracefull: 1 }), { code: 'ERR_INVALID_ARG_VALUE' })
  } finally {
    await a.close()
  }
})

for (const fair of [false, true]) test(`a ${fair ? 'fair ' : ''}lock whose validity ran out while its renewals were held up frees its key as soon as they land, not a TTL later`, async () => {
  // The server stalls past the lock's validity: the lock is lost locally, and
  // the renewals waiting in the socket land when it resumes, each re-arming
  // the full TTL. The cleanup that follows the loss deletes the key then.
  // A fair lock's key goes to the next waiter in line then, or is deleted
  // when nobody waits (it used to be left to its TTL).
  const own = await startRedis()
  const look = inspector(own)
  const c = new LockClient({ url: own.url, ttl: 3000, fair })
  const lost = []
  c.on('lost', (err) => lost.push(err))
  c.on('error', () => {})
  look.on('error', () => {})
  try {
    const lock = await c.acquire('lapse:landed')
    own.pause()
    let resumed
    try {
      await waitFor(() => lost.length > 0, { timeout: 10000, what: 'the loss to be reported' })
      assert.equal(lost[0].code, 'ERR_LOCK_LOST')
      assert.match(lost[0].message, /validity ran out/)
      assert.equal(lock.status, 'lost')
    } finally {
      own.resume()
      resumed = Date.now()
    }
    await waitFor(async () => (await look.exists('lapse:landed')) === 0, { timeout: 5000, what: 'the key to go' })
    const after = Date.now() - resumed
    assert.ok(after < 1500, `the key outlived the resume by ${after} ms: it waited for its TTL (3000 ms)`)
  } finally {
    look.disconnect()
    await c.close()
    await own.stop()
  }
})

test('a lapsed lock\'s cleanup leaves a key continued with a longer lease alone', async () => {
  const a = client()
  const b = client()
  try {
    const lock = await a.acquire('lapse:adopted', { ttl: 400, autoRenew: false })
    const adopted = await b.adopt('lapse:adopted', lock.token, { ttl: 20000 })
    await waitFor(() => lock.status === 'lost', { timeout: 5000, what: 'the first lock to lapse' })
    await a.settled()
    assert.equal(await redis.get('lapse:adopted'), lock.token)
    assert.ok(await redis.pttl('lapse:adopted') > 15000)
    assert.equal(await adopted.release(), true)
  } finally {
    await a.close()
    await b.close()
  }
})
