'use strict'

// The redlock drop-in with ioredis-mock clients (a common unit-test setup):
// the scripts run through the given client, so the locks live in the mock's
// memory, never on whatever server its placeholder address names.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const RedisMock = require('ioredis-mock')
const Redis = require('ioredis')
const Redlock = require('../redlock')
const { DistributedLock, withLock } = require('..')
const { ExecutionError, ResourceLockedError } = Redlock

const fresh = () => {
  const mock = new RedisMock()
  return mock.flushall().then(() => mock)
}

test('acquire, extend and release run in the mock\'s keyspace', async () => {
  const mock = await fresh()
  const redlock = new Redlock([mock])
  const lock = await redlock.acquire(['mock:a'], 2000)
  assert.equal(await mock.get('mock:a'), lock.value)
  const pttl = await mock.pttl('mock:a')
  assert.ok(pttl > 0 && pttl <= 2000, `pttl ${pttl}`)
  assert.ok(lock.expiration > Date.now())
  const stats = await lock.attempts[0]
  assert.ok(stats.votesFor.has(mock))

  const extended = await lock.extend(10000)
  assert.equal(lock.expiration, 0)
  assert.ok(await mock.pttl('mock:a') > 2000)
  assert.equal(extended.value, lock.value)

  await extended.release()
  assert.equal(await mock.get('mock:a'), null)
})

test('a held resource is refused with redlock\'s votes, and the holder is untouched', async () => {
  const mock = await fresh()
  const a = new Redlock([mock], { retryCount: 1, retryDelay: 10, retryJitter: 0 })
  const held = await a.acquire(['mock:held'], 5000)
  const err = await a.acquire(['mock:held'], 5000).catch((e) => e)
  assert.ok(err instanceof ExecutionError, String(err))
  assert.equal(err.attempts.length, 2)
  const votes = await err.attempts[1]
  assert.ok(votes.votesAgainst.get(mock) instanceof ResourceLockedError)
  assert.equal(await mock.get('mock:held'), held.value)
  await held.release()
  await assert.rejects(held.release(), ExecutionError, 'a second release finds nothing to release')
})

test('using runs the routine holding the lock in the mock and releases it', async () => {
  const mock = await fresh()
  const redlock = new Redlock([mock])
  let inside = null
  const result = await redlock.using(['mock:using'], 1000, async (signal) => {
    inside = await mock.get('mock:using')
    assert.equal(signal.aborted, false)
    return 'done'
  })
  assert.equal(result, 'done')
  assert.equal(typeof inside, 'string')
  assert.equal(await mock.get('mock:using'), null)
})

test('using extends the lock in the mock while the routine runs past its duration', async () => {
  const mock = await fresh()
  const redlock = new Redlock([mock], { automaticExtensionThreshold: 200 })
  let seen = null
  await redlock.using(['mock:extend'], 400, async (signal) => {
    const first = await mock.get('mock:extend')
    await new Promise((r) => setTimeout(r, 900))
    seen = { first, now: await mock.get('mock:extend'), aborted: signal.aborted }
  })
  assert.equal(seen.aborted, false)
  assert.equal(seen.now, seen.first, 'still held with the same value after twice its duration')
  assert.equal(await mock.get('mock:extend'), null)
})

test('two `using` on one mock are mutually exclusive', async () => {
  const mock = await fresh()
  const redlock = new Redlock([mock], { retryDelay: 20, retryJitter: 5 })
  let inside = 0
  let most = 0
  await Promise.all([1, 2, 3].map(() => redlock.using(['mock:excl'], 1000, async () => {
    inside++
    most = Math.max(most, inside)
    await new Promise((r) => setTimeout(r, 30))
    inside--
  })))
  assert.equal(most, 1)
})

test('an ioredis client on a custom Connector is used through the client too', async () => {
  // Nothing listens behind this connector: lockdog must not open its own
  // connection to the placeholder address, and the votes name the client.
  class NowhereConnector {
    constructor() {}
    connect() { return Promise.reject(new Error('no server behind this connector')) }
    check() { return true }
    disconnect() {}
  }
  const client = new Redis({ Connector: NowhereConnector, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false })
  client.on('error', () => {})
  const redlock = new Redlock([client], { retryCount: 0 })
  const err = await redlock.acquire(['mock:connector'], 1000).catch((e) => e)
  assert.ok(err instanceof ExecutionError, String(err))
  const votes = await err.attempts[0]
  assert.ok(votes.votesAgainst.has(client))
  client.disconnect()
})

test('the hand-written lock drop-ins refuse a client lockdog cannot reach a server for', () => {
  const mock = new RedisMock()
  assert.throws(() => new DistributedLock(mock, 'mock:dl'), (e) => e.code === 'ERR_LOCK_UNREACHABLE_CLIENT' && /ioredis-mock/.test(e.message))
  assert.throws(() => withLock(mock, 'mock:dl', async () => {}), (e) => e.code === 'ERR_LOCK_UNREACHABLE_CLIENT')
})

// Mocks on one host and port share their data: each member here has its own.
let port = 46000
const own = async () => {
  const mock = new RedisMock({ port: port++ })
  await mock.flushall()
  return mock
}

/** A member of its own whose `eval` of a taking script answers `delayMs` late (Infinity: never). */
const slowMock = async (delayMs, every = false) => {
  const mock = await own()
  const evalNow = mock.eval.bind(mock)
  mock.eval = (script, ...args) => {
    if (!every && !/"exists"/.test(script)) return evalNow(script, ...args)
    if (delayMs === Infinity) return new Promise(() => {})
    return new Promise((resolve) => setTimeout(resolve, delayMs)).then(() => evalNow(script, ...args)).then((applied) => {
      mock.landed = (mock.landed || 0) + 1
      return applied
    })
  }
  return mock
}

const waitFor = async (check, deadlineMs, what) => {
  const end = Date.now() + deadlineMs
  while (!(await check())) {
    if (Date.now() > end) assert.fail(`not within ${deadlineMs} ms: ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

test('a member that never answers is voted against within a bound: acquire, extend, release and using settle', async () => {
  const [a, b, silent] = [await own(), await own(), await slowMock(Infinity, true)]
  const redlock = new Redlock([a, b, silent], { retryCount: 0 })
  const errors = []
  redlock.on('error', (e) => errors.push(e))
  const lock = await redlock.acquire(['mock:silent'], 5000)
  assert.ok(lock.expiration > Date.now())
  const votes = await lock.attempts[0]
  assert.equal(votes.votesFor.size, 2)
  assert.equal(votes.votesAgainst.get(silent).code, 'ERR_LOCK_CONNECTION')
  assert.ok(errors.some((e) => e.code === 'ERR_LOCK_CONNECTION'))
  const extended = await lock.extend(5000)
  await extended.release()
  assert.equal(await a.get('mock:silent'), null)
  assert.equal(await redlock.using(['mock:silent'], 5000, async () => 'ran'), 'ran')

  // Alone, the silent member fails every attempt: the call rejects, it does not hang.
  const alone = new Redlock([silent], { retryCount: 1, retryDelay: 10, retryJitter: 0 })
  alone.on('error', () => {})
  const err = await alone.acquire(['mock:silent:alone'], 5000).catch((e) => e)
  assert.ok(err instanceof ExecutionError, String(err))
  assert.equal(err.attempts.length, 2)
  await assert.rejects(alone.release(lock), ExecutionError)
})

test('a slow member never hands back a lock with no validity, and what it granted late is taken back', async () => {
  // Answers after 250 ms: within a 2 s lease, the lock is valid.
  const quick = new Redlock([await slowMock(250)], { retryCount: 0 })
  const held = await quick.acquire(['mock:slow:ok'], 2000)
  assert.ok(held.expiration > Date.now() + 1000, `expiration ${held.expiration - Date.now()} ms ahead`)
  await held.release()

  // Answers after 500 ms: a 300 ms lease would be over before the vote came.
  const late = new Redlock([await slowMock(500)], { retryCount: 0 })
  late.on('error', () => {})
  const err = await late.acquire(['mock:slow:late'], 300).catch((e) => e)
  assert.ok(err instanceof ExecutionError, String(err))

  // Answers after 1.5 s, past the 1 s vote bound, with a 10 s lease: the acquire
  // fails, and the key the member set late is released rather than left for 10 s.
  const mock = await slowMock(1500)
  const slow = new Redlock([mock], { retryCount: 0 })
  slow.on('error', () => {})
  const failed = await slow.acquire(['mock:slow:taken-back'], 10000).catch((e) => e)
  assert.ok(failed instanceof ExecutionError, String(failed))
  assert.equal((await failed.attempts[0]).votesAgainst.get(mock).code, 'ERR_LOCK_CONNECTION')
  await waitFor(() => mock.landed === 1, 3000, 'the late grant landed')
  // Its lease is 10 s: gone within 2 s means it was taken back.
  await waitFor(async () => (await mock.get('mock:slow:taken-back')) === null, 2000, 'the late grant taken back')
})
