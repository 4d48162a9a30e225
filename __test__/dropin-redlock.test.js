'use strict'

// Differential tests: every body runs against the real redlock@5.0.0-beta.2 and
// against lockdog/redlock, with the same ioredis clients on the same servers, and
// asserts the same observable results. Where lockdog deliberately differs, the
// test's name says so (and docs/migrating.md, "Deliberate differences", gives the reason).

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const {
  compat, startServers, startCluster, stop, client, clusterClient, flush, statsOf, before, after, waitFor,
} = require('./helpers/redlock-compat')

const HUGE = Math.floor(Number.MAX_SAFE_INTEGER / 10)
const DURATION_MESSAGE = 'Duration must be an integer value in milliseconds.'
const QUORUM_MESSAGE = 'The operation was unable to achieve a quorum during its retry window.'
const locked = (n) => `The operation was applied to: 0 of the ${n} requested resources.`
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

let servers = []
let open = []

before(async () => {
  servers = await startServers(3)
})
after(async () => {
  open.forEach((c) => c.disconnect())
  await stop(servers)
})

/** Fresh ioredis clients on the first `n` servers, and clean servers. */
async function members(n, options) {
  await flush(servers)
  const cs = servers.slice(0, n).map((s) => client(s, options))
  open.push(...cs)
  return cs
}

async function done(redlock, cs) {
  await redlock.quit().catch(() => {})
  cs.forEach((c) => c.disconnect())
  open = open.filter((c) => !cs.includes(c))
}

/**
 * Waits (briefly) until `key` is gone on every client: redlock's release resolves
 * once a quorum answered, so the last member may still be deleting.
 */
function gone(cs, key) {
  return waitFor(async () => (await Promise.all(cs.map((c) => c.exists(key)))).every((n) => n === 0),
    { timeout: 1000, interval: 5, what: `${key} released on every member` })
}

/**
 * Runs the assertions in `check` until they pass (1 s at most): redlock resolves
 * an operation once a quorum answered, so the last member may still be writing.
 */
async function eventually(check) {
  const deadline = Date.now() + 1000
  for (;;) {
    try {
      return await check()
    } catch (e) {
      if (Date.now() > deadline) throw e
      await sleep(5)
    }
  }
}

/** Which of `cs` (by index) are in a Set or Map of votes. */
const who = (votes, cs) => cs.map((c, i) => (votes.has(c) ? i : -1)).filter((i) => i >= 0)

/**
 * A PTTL read soon after a lease of `duration` ms was set: at most that, and
 * less than a second below (redlock's own tests compare 200 ms buckets, which
 * a slow read can cross).
 */
function near(pttl, duration) {
  assert.ok(pttl <= duration && pttl > duration - 1000, `pttl ${pttl} for a lease of ${duration} ms`)
}

/** Rejection of `p`, or a failure if it resolves. */
async function rejection(p) {
  return p.then((v) => assert.fail(`expected a rejection, got ${v}`), (e) => e)
}

/** Checks that every attempt has redlock's stats shape and vote types, and returns them. */
async function checkAttempts(side, attempts, { size, membership, against }) {
  assert.ok(Array.isArray(attempts), 'attempts is an array')
  assert.equal(attempts.length, size)
  for (const a of attempts) assert.ok(a instanceof Promise, 'each attempt is a promise')
  const stats = await statsOf(attempts)
  for (const s of stats) {
    assert.deepEqual(Object.keys(s).sort(), ['membershipSize', 'quorumSize', 'votesAgainst', 'votesFor'])
    assert.equal(s.membershipSize, membership)
    assert.equal(s.quorumSize, Math.floor(membership / 2) + 1)
    assert.ok(s.votesFor instanceof Set)
    assert.ok(s.votesAgainst instanceof Map)
    if (against) against(s)
  }
  return stats
}

compat('single instance', [
  {
    name: 'acquires, extends and releases a single lock with a huge safe-integer duration',
    async body({ Redlock }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis])
      const t0 = Date.now()
      let lock = await redlock.acquire(['{redlock}a'], HUGE)
      assert.equal(await redis.get('{redlock}a'), lock.value)
      near(await redis.pttl('{redlock}a'), HUGE)
      assert.deepEqual(lock.resources, ['{redlock}a'])
      assert.equal(typeof lock.value, 'string')
      assert.ok(lock.expiration >= t0 + HUGE - Math.round(HUGE * 0.01) - 2 - 5)
      assert.ok(lock.expiration <= Date.now() + HUGE - Math.round(HUGE * 0.01) - 2)
      await checkAttempts(null, lock.attempts, { size: 1, membership: 1, against: (s) => assert.deepEqual([...s.votesFor], [redis]) })
      const old = lock
      lock = await lock.extend(3 * HUGE)
      assert.equal(old.expiration, 0)
      assert.equal(lock.value, old.value)
      assert.equal(await redis.get('{redlock}a'), lock.value)
      near(await redis.pttl('{redlock}a'), 3 * HUGE)
      const result = await lock.release()
      assert.equal(lock.expiration, 0)
      assert.deepEqual(Object.keys(result), ['attempts'])
      await checkAttempts(null, result.attempts, { size: 1, membership: 1 })
      assert.equal(await redis.get('{redlock}a'), null)
      await done(redlock, [redis])
    },
  },
  {
    name: 'acquires, extends and releases a multi-resource lock',
    async body({ Redlock }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis])
      let lock = await redlock.acquire(['{redlock}a1', '{redlock}a2'], HUGE)
      for (const k of ['{redlock}a1', '{redlock}a2']) {
        assert.equal(await redis.get(k), lock.value)
        near(await redis.pttl(k), HUGE)
      }
      lock = await lock.extend(3 * HUGE)
      for (const k of ['{redlock}a1', '{redlock}a2']) {
        assert.equal(await redis.get(k), lock.value)
        near(await redis.pttl(k), 3 * HUGE)
      }
      await lock.release()
      assert.equal(await redis.exists('{redlock}a1', '{redlock}a2'), 0)
      await done(redlock, [redis])
    },
  },
  {
    name: 'a non-integer duration rejects acquire, extend and using with redlock\'s message',
    async body({ Redlock }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis])
      for (const bad of [1.5, '1000', undefined, NaN]) {
        const p = redlock.acquire(['{redlock}d'], bad)
        assert.ok(p instanceof Promise, 'acquire returns a promise')
        const e = await rejection(p)
        assert.equal(e.constructor, Error)
        assert.equal(e.message, DURATION_MESSAGE)
      }
      const lock = await redlock.acquire(['{redlock}d'], 1000)
      const e1 = await rejection(lock.extend(10.5))
      assert.equal(e1.message, DURATION_MESSAGE)
      const e2 = await rejection(redlock.using(['{redlock}d2'], 999.9, async () => 1))
      assert.equal(e2.message, DURATION_MESSAGE)
      assert.equal(await redis.exists('{redlock}d2'), 0)
      await lock.release()
      await done(redlock, [redis])
    },
  },
  {
    name: 'acquire(undefined, 1000) returns a promise that rejects after every attempt',
    async body({ Redlock, ExecutionError }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis], { retryCount: 2, retryDelay: 10, retryJitter: 0 })
      const errors = []
      redlock.on('error', (e) => errors.push(e))
      let p
      assert.doesNotThrow(() => { p = redlock.acquire(undefined, 1000) })
      const e = await rejection(p)
      assert.ok(e instanceof ExecutionError)
      assert.equal(e.message, QUORUM_MESSAGE)
      await checkAttempts(null, e.attempts, {
        size: 3,
        membership: 1,
        against: (s) => {
          assert.equal(s.votesFor.size, 0)
          assert.ok(s.votesAgainst.get(redis) instanceof TypeError)
        },
      })
      assert.ok(errors.length >= 3 && errors.every((x) => x instanceof TypeError))
      await done(redlock, [redis])
    },
  },
  {
    name: 'acquire([], 1000) resolves a lock on no resources, which extends and releases',
    async body({ Redlock }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis])
      let lock = await redlock.acquire([], 1000)
      assert.deepEqual(lock.resources, [])
      assert.equal(typeof lock.value, 'string')
      assert.ok(lock.expiration > Date.now())
      await checkAttempts(null, lock.attempts, { size: 1, membership: 1, against: (s) => assert.equal(s.votesFor.size, 1) })
      lock = await lock.extend(2000)
      await lock.release()
      assert.equal(await redis.dbsize(), 0)
      await done(redlock, [redis])
    },
  },
  {
    name: 'contention: ResourceLockedError votes, retryCount + 1 attempts, one error event per vote and one for the cleanup',
    async body({ Redlock, ExecutionError, ResourceLockedError }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis], { retryCount: 2, retryDelay: 50, retryJitter: 0 })
      const events = []
      redlock.on('error', (e) => events.push(e))
      const held = await redlock.acquire(['{redlock}b'], 10000)
      const t0 = Date.now()
      const e = await rejection(redlock.acquire(['{redlock}b'], 1000))
      const took = Date.now() - t0
      assert.ok(e instanceof ExecutionError)
      assert.equal(e.name, 'ExecutionError')
      assert.equal(e.message, QUORUM_MESSAGE)
      await checkAttempts(null, e.attempts, {
        size: 3,
        membership: 1,
        against: (s) => {
          assert.equal(s.votesFor.size, 0)
          assert.deepEqual([...s.votesAgainst.keys()], [redis])
          const v = s.votesAgainst.get(redis)
          assert.ok(v instanceof ResourceLockedError)
          assert.equal(v.name, 'ResourceLockedError')
          assert.equal(v.message, locked(1))
        },
      })
      assert.ok(took >= 100 && took < 2000, `took ${took} ms`)
      assert.equal(events.length, 4)
      for (const ev of events) {
        assert.ok(ev instanceof ResourceLockedError)
        assert.equal(ev.message, locked(1))
      }
      assert.equal(await redis.get('{redlock}b'), held.value)
      await held.release()
      await done(redlock, [redis])
    },
  },
  {
    name: 'individual locks are exclusive (default settings: 11 attempts in about 2 s)',
    async body({ Redlock, ExecutionError, ResourceLockedError }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis])
      const lock = await redlock.acquire(['{redlock}c'], HUGE)
      near(await redis.pttl('{redlock}c'), HUGE)
      const t0 = Date.now()
      const e = await rejection(redlock.acquire(['{redlock}c'], HUGE))
      const took = Date.now() - t0
      assert.ok(e instanceof ExecutionError)
      await checkAttempts(null, e.attempts, {
        size: 11,
        membership: 1,
        against: (s) => assert.ok(s.votesAgainst.get(redis) instanceof ResourceLockedError),
      })
      // 10 pauses of 200 ± 100 ms.
      assert.ok(took >= 1000 && took < 5000, `took ${took} ms`)
      assert.equal(await redis.get('{redlock}c'), lock.value)
      await lock.release()
      assert.equal(await redis.get('{redlock}c'), null)
      await done(redlock, [redis])
    },
  },
  {
    name: 'overlapping multi-locks are exclusive',
    async body({ Redlock, ExecutionError, ResourceLockedError }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis], { retryCount: 3, retryDelay: 20 })
      const lock = await redlock.acquire(['{redlock}c1', '{redlock}c2'], HUGE)
      const e = await rejection(redlock.acquire(['{redlock}c2', '{redlock}c3'], HUGE))
      assert.ok(e instanceof ExecutionError)
      await checkAttempts(null, e.attempts, {
        size: 4,
        membership: 1,
        against: (s) => {
          const v = s.votesAgainst.get(redis)
          assert.ok(v instanceof ResourceLockedError)
          assert.equal(v.message, locked(2))
        },
      })
      assert.equal(await redis.get('{redlock}c1'), lock.value)
      assert.equal(await redis.get('{redlock}c2'), lock.value)
      assert.equal(await redis.get('{redlock}c3'), null)
      await lock.release()
      assert.equal(await redis.exists('{redlock}c1', '{redlock}c2', '{redlock}c3'), 0)
      await done(redlock, [redis])
    },
  },
  {
    name: 'per-call settings and the Redlock methods: redlock.extend and redlock.release take a lock and settings',
    async body({ Redlock, Lock, ExecutionError }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis], { retryCount: 5, retryDelay: 500 })
      const lock = await redlock.acquire(['{redlock}s'], 10000, { retryCount: 0 })
      assert.equal(lock.attempts.length, 1)
      const t0 = Date.now()
      const e = await rejection(redlock.acquire(['{redlock}s'], 10000, { retryCount: 1, retryDelay: 10, retryJitter: 0 }))
      assert.ok(e instanceof ExecutionError)
      assert.equal(e.attempts.length, 2)
      assert.ok(Date.now() - t0 < 400, 'the call\'s retryDelay replaced the constructor\'s')
      const extended = await redlock.extend(lock, 20000, { retryCount: 0 })
      assert.ok(extended instanceof Lock)
      assert.equal(extended.value, lock.value)
      assert.equal(lock.expiration, 0)
      const pttl = await redis.pttl('{redlock}s')
      assert.ok(pttl > 19000 && pttl <= 20000, `pttl ${pttl}`)
      const result = await redlock.release(extended, { retryCount: 0 })
      assert.deepEqual(Object.keys(result), ['attempts'])
      assert.equal(result.attempts.length, 1)
      assert.equal(extended.expiration, 0)
      assert.equal(await redis.get('{redlock}s'), null)
      const again = await rejection(redlock.release(extended, { retryCount: 2, retryDelay: 5, retryJitter: 0 }))
      assert.ok(again instanceof ExecutionError)
      assert.equal(again.attempts.length, 3)
      await done(redlock, [redis])
    },
  },
  {
    name: 'locks automatically expire',
    async body({ Redlock }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis], { retryCount: 0 })
      const lock = await redlock.acquire(['{redlock}e'], 200)
      assert.equal(await redis.get('{redlock}e'), lock.value)
      const pttl = await redis.pttl('{redlock}e')
      assert.ok(pttl > 100 && pttl <= 200, `pttl ${pttl}`)
      await waitFor(async () => (await redis.exists('{redlock}e')) === 0, { timeout: 2000, what: 'expiry' })
      const lock2 = await redlock.acquire(['{redlock}e'], 200)
      assert.equal(await redis.get('{redlock}e'), lock2.value)
      assert.notEqual(lock2.value, lock.value)
      await lock2.release()
      assert.equal(await redis.get('{redlock}e'), null)
      await done(redlock, [redis])
    },
  },
  {
    name: 'releasing a lock twice rejects after every attempt; an expired lock cannot be extended',
    async body({ Redlock, ExecutionError, ResourceLockedError }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis], { retryCount: 1, retryDelay: 10, retryJitter: 0 })
      const lock = await redlock.acquire(['{redlock}r'], 150)
      await lock.release()
      const e = await rejection(lock.release())
      assert.ok(e instanceof ExecutionError)
      assert.equal(e.message, QUORUM_MESSAGE)
      await checkAttempts(null, e.attempts, {
        size: 2,
        membership: 1,
        against: (s) => {
          assert.ok(s.votesAgainst.get(redis) instanceof ResourceLockedError)
          assert.equal(s.votesAgainst.get(redis).message, locked(1))
        },
      })
      const lock2 = await redlock.acquire(['{redlock}r'], 100)
      await waitFor(() => Date.now() > lock2.expiration + 5, { what: 'validity ends' })
      const x = await rejection(lock2.extend(1000))
      assert.ok(x instanceof ExecutionError)
      assert.equal(x.message, 'Cannot extend an already-expired lock.')
      assert.deepEqual(x.attempts, [])
      await done(redlock, [redis])
    },
  },
  {
    name: 'extending a lock whose key was taken away rejects with ResourceLockedError votes',
    async body({ Redlock, ExecutionError, ResourceLockedError }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis], { retryCount: 2, retryDelay: 10, retryJitter: 0 })
      const lock = await redlock.acquire(['{redlock}x1'], 10000)
      await redis.set('{redlock}x1', 'someone else')
      const e = await rejection(lock.extend(10000))
      assert.ok(e instanceof ExecutionError)
      await checkAttempts(null, e.attempts, {
        size: 3,
        membership: 1,
        against: (s) => assert.equal(s.votesAgainst.get(redis).message, locked(1)),
      })
      assert.equal(await redis.get('{redlock}x1'), 'someone else')
      assert.ok(lock.expiration > 0, 'a failed extension leaves the lock object as it was')
      void ResourceLockedError
      await done(redlock, [redis])
    },
  },
  {
    name: 'Redis unreachable: retryCount + 1 attempts, each a vote against with "Connection is closed."',
    async body({ Redlock, ExecutionError }) {
      await flush(servers)
      // A port that was just free: nothing listens there.
      const down = await startServers(1)
      const port = down[0].port
      await stop(down)
      const redis = client({ port }, {
        maxRetriesPerRequest: 0,
        autoResendUnfulfilledCommands: false,
        autoResubscribe: false,
        retryStrategy: () => null,
        reconnectOnError: () => false,
      })
      const redlock = new Redlock([redis], { retryDelay: 20, retryJitter: 0 })
      const events = []
      redlock.on('error', (e) => events.push(e))
      const t0 = Date.now()
      const e = await rejection(redlock.acquire(['{redlock}u'], HUGE))
      const took = Date.now() - t0
      assert.ok(e instanceof ExecutionError)
      assert.equal(e.message, QUORUM_MESSAGE)
      await checkAttempts(null, e.attempts, {
        size: 11,
        membership: 1,
        against: (s) => {
          assert.equal(s.votesFor.size, 0)
          const v = s.votesAgainst.get(redis)
          assert.equal(v.constructor.name === 'ResourceLockedError', false)
          assert.ok(v instanceof Error)
          assert.equal(v.message, 'Connection is closed.')
        },
      })
      assert.ok(took >= 200 && took < 3000, `took ${took} ms`)
      assert.equal(events.length, 12)
      assert.ok(events.every((ev) => ev.message === 'Connection is closed.'))
      redis.disconnect()
      await redlock.quit().catch(() => {})
    },
  },
  {
    name: 'using acquires, extends past its duration, and releases',
    async body({ Redlock }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis])
      const out = await redlock.using(['{redlock}x'], 600, { automaticExtensionThreshold: 100 }, async (signal) => {
        const value = await redis.get('{redlock}x')
        assert.equal(typeof value, 'string')
        await sleep(900)
        assert.equal(signal.aborted, false)
        assert.equal(signal.error, undefined)
        assert.equal(await redis.get('{redlock}x'), value)
        return value
      })
      assert.equal(typeof out, 'string')
      assert.equal(await redis.get('{redlock}x'), null)
      // The settings argument is optional.
      assert.equal(await redlock.using(['{redlock}x'], 600, async () => 'plain'), 'plain')
      // A routine's error is the result; the lock is released.
      const e = await rejection(redlock.using(['{redlock}x'], 600, async () => { throw new Error('routine failed') }))
      assert.equal(e.message, 'routine failed')
      assert.equal(await redis.get('{redlock}x'), null)
      const t = await rejection(redlock.using(['{redlock}x'], 550, async () => 1))
      assert.equal(t.message, 'A lock `duration` must be at least 100ms greater than the `automaticExtensionThreshold` setting.')
      await done(redlock, [redis])
    },
  },
  {
    name: 'using is exclusive: concurrent routines on one resource never overlap',
    async body({ Redlock }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis])
      let inside = 0
      let most = 0
      const routine = async (signal) => {
        inside++
        most = Math.max(most, inside)
        const value = await redis.get('{redlock}y')
        await sleep(400)
        assert.equal(signal.aborted, false)
        assert.equal(await redis.get('{redlock}y'), value)
        inside--
        return value
      }
      const settings = { automaticExtensionThreshold: 100 }
      const [a, b] = await Promise.all([
        redlock.using(['{redlock}y'], 1000, settings, routine),
        redlock.using(['{redlock}y'], 1000, settings, routine),
      ])
      assert.equal(most, 1)
      assert.notEqual(a, b)
      assert.equal(await redis.get('{redlock}y'), null)
      await done(redlock, [redis])
    },
  },
  {
    name: 'deliberate difference (a lock never handed back with no validity): a using that waited longer than its duration',
    async body({ Redlock, ExecutionError, name }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis])
      let inside = 0
      let most = 0
      const aborts = []
      const routine = async (signal) => {
        inside++
        most = Math.max(most, inside)
        await sleep(400)
        aborts.push(signal.aborted)
        inside--
        return 'done'
      }
      const settings = { automaticExtensionThreshold: 100 }
      // redlock schedules the expired lock's extension at a negative delay; Node
      // warns of it on stderr. Kept here, and checked, rather than printed.
      const warned = []
      const emitWarning = process.emitWarning
      process.emitWarning = (w, ...rest) => {
        if ((w?.name ?? rest[0]?.type ?? rest[0]) === 'TimeoutNegativeWarning') warned.push(String(w?.message ?? w))
        else emitWarning.call(process, w, ...rest)
      }
      let first, second
      try {
        [first, second] = await Promise.allSettled([
          redlock.using(['{redlock}w'], 300, settings, routine),
          sleep(20).then(() => redlock.using(['{redlock}w'], 300, settings, routine)),
        ])
      } finally {
        process.emitWarning = emitWarning
      }
      assert.equal(first.status, 'fulfilled')
      assert.equal(most, 1)
      if (name === 'redlock@5.0.0-beta.2') {
        // The waiter's lock expires at start + duration, counted from before its
        // first attempt: it comes back expired, its signal aborts at once, and its
        // release finds the key gone.
        // (Node warns of a negative delay from Node 23 on.)
        const warns = Number(process.versions.node.split('.')[0]) >= 23 ? 1 : 0
        assert.equal(warned.length, warns, `negative extension delays: ${warned}`)
        assert.deepEqual(aborts, [false, true])
        assert.equal(second.status, 'rejected')
        assert.ok(second.reason instanceof ExecutionError)
      } else {
        assert.deepEqual(warned, [], 'lockdog schedules no negative timeout')
        assert.deepEqual(aborts, [false, false])
        assert.equal(second.status, 'fulfilled')
      }
      await done(redlock, [redis])
    },
  },
  {
    name: 'deliberate difference (a lock never handed back with no validity): a duration shorter than the drift',
    async body({ Redlock, ExecutionError, name }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis], { retryCount: 1, retryDelay: 10 })
      const p = redlock.acquire(['{redlock}tiny'], 2)
      if (name === 'redlock@5.0.0-beta.2') {
        const lock = await p
        assert.ok(lock.expiration <= Date.now(), 'handed back with its validity already over')
      } else {
        const e = await rejection(p)
        assert.ok(e instanceof ExecutionError)
        assert.equal(e.attempts.length, 2)
      }
      await done(redlock, [redis])
    },
  },
  {
    name: 'deliberate difference (using always settles): using rejects at once when its release finds the lock taken by another holder',
    async body({ Redlock, ExecutionError, ResourceLockedError, name }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis], { retryCount: 1, retryDelay: 10 })
      const other = new Redlock([redis], { retryCount: 0 })
      let theirs = null
      const e = await rejection(redlock.using(['{redlock}t'], 3000, async () => {
        await redis.del('{redlock}t')
        theirs = await other.acquire(['{redlock}t'], 3000)
        return 'routine result'
      }))
      assert.ok(e instanceof ExecutionError)
      assert.equal(e.message, QUORUM_MESSAGE)
      // redlock retries the release retryCount times; lockdog knows the lock is gone.
      await checkAttempts(null, e.attempts, {
        size: name === 'redlock@5.0.0-beta.2' ? 2 : 1,
        membership: 1,
        against: (s) => assert.ok(s.votesAgainst.get(redis) instanceof ResourceLockedError),
      })
      if (name === 'lockdog/redlock') {
        assert.equal(e.code, 'ERR_LOCK_LOST')
        assert.equal(e.cause, 'routine result')
      }
      assert.equal(await redis.get('{redlock}t'), theirs.value, 'the other holder keeps its lock')
      await theirs.release()
      await other.quit().catch(() => {})
      await done(redlock, [redis])
    },
  },
  {
    name: 'deliberate difference (native renewal in using): a lock taken away aborts the signal, and using rejects',
    async body({ Redlock, ExecutionError, name }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis], { retryCount: 2, retryDelay: 50, retryJitter: 0 })
      const events = []
      redlock.on('error', (e) => events.push(e))
      let seen = null
      const t0 = Date.now()
      const e = await rejection(redlock.using(['{redlock}z'], 1000, async (signal) => {
        await redis.set('{redlock}z', 'someone else')
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
        seen = { error: signal.error, reason: signal.reason, at: Date.now() - t0 }
        return 'routine result'
      }))
      assert.ok(seen.error instanceof ExecutionError)
      assert.equal(seen.reason.name, 'AbortError')
      assert.ok(e instanceof ExecutionError)
      assert.equal(e.message, QUORUM_MESSAGE)
      assert.equal(e.attempts.length, name === 'redlock@5.0.0-beta.2' ? 3 : 1)
      assert.equal(await redis.get('{redlock}z'), 'someone else')
      assert.ok(events.length > 0)
      // redlock notices at its first extension (duration - automaticExtensionThreshold)
      // and aborts once the lock's validity is over; lockdog's watchdog notices at
      // duration / 3 and aborts at once.
      assert.ok(seen.at < 5000, `aborted after ${seen.at} ms`)
      await done(redlock, [redis])
    },
  },
  {
    name: 'deliberate difference (using always settles): with retryCount -1, a routine that ends after its lock was taken away',
    async body({ Redlock, ExecutionError, name }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis], { retryCount: -1, retryDelay: 20, retryJitter: 0 })
      let value = null
      const outcome = redlock.using(['{redlock}s'], 1000, { automaticExtensionThreshold: 800 }, async (signal) => {
        value = await redis.get('{redlock}s')
        await redis.set('{redlock}s', 'someone else')
        await Promise.race([sleep(1200), new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))])
        return 'routine result'
      }).then((v) => ({ v }), (e) => ({ e }))
      const settled = await Promise.race([outcome, sleep(3000).then(() => 'pending')])
      if (name === 'redlock@5.0.0-beta.2') {
        // Its extension retries forever and `using` waits for it before releasing.
        assert.equal(settled, 'pending')
        // Hand the key back so the extension succeeds and this test can end.
        await redis.set('{redlock}s', value, 'PX', 1000)
        await outcome
      } else {
        assert.ok(settled.e instanceof ExecutionError)
        assert.equal(settled.e.code, 'ERR_LOCK_LOST')
        assert.equal(settled.e.cause, 'routine result')
      }
      await done(redlock, [redis])
    },
  },
  {
    name: 'deliberate difference (bad input is refused): settings of the wrong type or range, custom scripts, members with different key prefixes; a Lock rebuilt by hand releases',
    async body({ Redlock, Lock, name }) {
      const [redis] = await members(1)
      const bad = [{ retryCount: 'x' }, { retryDelay: -1 }, { driftFactor: 2 }]
      const redlock = new Redlock([redis], { retryCount: 0 })
      const held = await redlock.acquire(['{redlock}k'], 10000)
      const rebuilt = new Lock(redlock, ['{redlock}k'], held.value, [], held.expiration)
      const prefixed = client(servers[1], { keyPrefix: 'app:' })
      if (name === 'redlock@5.0.0-beta.2') {
        for (const s of bad) assert.ok(new Redlock([redis], s))
        assert.ok(new Redlock([redis, prefixed]), 'redlock takes members with different key prefixes')
        assert.equal(new Redlock([redis], { retryCount: 'x' }).settings.retryCount, 10, 'redlock falls back to its default')
        assert.ok(new Redlock([redis], {}, { acquireScript: (s) => s }))
        await rebuilt.release()
        assert.equal(await redis.get('{redlock}k'), null)
      } else {
        for (const s of bad) assert.throws(() => new Redlock([redis], s), { code: /^ERR_INVALID_ARG_(TYPE|VALUE)$/ })
        assert.throws(() => new Redlock([redis, prefixed]), { code: 'ERR_INVALID_ARG_VALUE', message: /keyPrefix/ })
        assert.throws(() => new Redlock([redis], {}, { acquireScript: (s) => s }), { code: 'ERR_INVALID_ARG_VALUE' })
        await assert.rejects(redlock.acquire(['{redlock}k2'], 1000, { retryCount: 'x' }), { code: 'ERR_INVALID_ARG_TYPE' })
        // A Lock rebuilt from a stored value is adopted by its token, as redlock releases it.
        await rebuilt.release()
        assert.equal(await redis.get('{redlock}k'), null)
      }
      prefixed.disconnect()
      await done(redlock, [redis])
    },
  },
  {
    name: 'deliberate difference (own connections): a lock still works after the caller disconnected its client',
    async body({ Redlock, ExecutionError, name }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis], { retryCount: 0 })
      const lock = await redlock.acquire(['{redlock}o'], 10000)
      redis.disconnect()
      const extended = await lock.extend(10000).then((l) => l, (e) => e)
      if (name === 'redlock@5.0.0-beta.2') {
        assert.ok(extended instanceof ExecutionError, 'redlock talks through the caller\'s client')
      } else {
        assert.ok(extended.value === lock.value, 'lockdog talks through connections of its own')
        await extended.release()
      }
      await redlock.quit().catch(() => {})
    },
  },
  {
    name: 'an \'error\' listener sees ResourceLockedError on contended attempts; the constructor keeps a listener of its own',
    async body({ Redlock }) {
      const [redis] = await members(1)
      const redlock = new Redlock([redis], { retryCount: 0 })
      assert.equal(redlock.listenerCount('error'), 1)
      assert.ok(redlock.clients instanceof Set)
      assert.deepEqual([...redlock.clients], [redis])
      assert.deepEqual(redlock.settings, { driftFactor: 0.01, retryCount: 0, retryDelay: 200, retryJitter: 100, automaticExtensionThreshold: 500 })
      assert.throws(() => new Redlock([]), { message: 'Redlock must be instantiated with at least one redis client.' })
      await done(redlock, [redis])
    },
  },
])

compat('three instances', [
  {
    name: 'acquires, extends and releases a single lock on every instance',
    async body({ Redlock }) {
      const cs = await members(3)
      const redlock = new Redlock(cs)
      let lock = await redlock.acquire(['{redlock}a'], HUGE)
      await eventually(async () => {
        for (const c of cs) {
          assert.equal(await c.get('{redlock}a'), lock.value)
          near(await c.pttl('{redlock}a'), HUGE)
        }
      })
      await checkAttempts(null, lock.attempts, {
        size: 1,
        membership: 3,
        against: (s) => assert.deepEqual(who(s.votesFor, cs), [0, 1, 2]),
      })
      lock = await lock.extend(3 * HUGE)
      await eventually(async () => {
        for (const c of cs) near(await c.pttl('{redlock}a'), 3 * HUGE)
      })
      await lock.release()
      await gone(cs, '{redlock}a')
      await done(redlock, cs)
    },
  },
  {
    name: 'succeeds when a minority of instances hold the resource, and leaves their value alone',
    async body({ Redlock }) {
      const cs = await members(3)
      const [a, b, c] = cs
      const redlock = new Redlock(cs)
      await c.set('{redlock}b', 'other')
      let lock = await redlock.acquire(['{redlock}b'], HUGE)
      assert.equal(await a.get('{redlock}b'), lock.value)
      assert.equal(await b.get('{redlock}b'), lock.value)
      assert.equal(await c.get('{redlock}b'), 'other')
      assert.equal(await c.pttl('{redlock}b'), -1)
      lock = await lock.extend(3 * HUGE)
      near(await a.pttl('{redlock}b'), 3 * HUGE)
      near(await b.pttl('{redlock}b'), 3 * HUGE)
      assert.equal(await c.get('{redlock}b'), 'other')
      assert.equal(await c.pttl('{redlock}b'), -1)
      await lock.release()
      await gone([a, b], '{redlock}b')
      assert.equal(await c.get('{redlock}b'), 'other')
      await done(redlock, cs)
    },
  },
  {
    name: 'a successful attempt\'s votes name the minority that voted against',
    async body({ Redlock, ResourceLockedError }) {
      const cs = await members(3)
      const [a, b, c] = cs
      const redlock = new Redlock(cs)
      await c.set('{redlock}v', 'other')
      const lock = await redlock.acquire(['{redlock}v'], 10000)
      const [s] = await statsOf(lock.attempts)
      assert.deepEqual(who(s.votesFor, cs), [0, 1])
      assert.deepEqual(who(s.votesAgainst, cs), [2])
      assert.ok(s.votesAgainst.get(c) instanceof ResourceLockedError)
      void a
      void b
      await lock.release()
      await done(redlock, cs)
    },
  },
  {
    name: 'fails when a majority of instances hold the resource: 11 attempts of ResourceLockedError votes, nothing left behind',
    async body({ Redlock, ExecutionError, ResourceLockedError }) {
      const cs = await members(3)
      const [a, b, c] = cs
      const redlock = new Redlock(cs)
      await b.set('{redlock}c', 'other1')
      await c.set('{redlock}c', 'other2')
      const e = await rejection(redlock.acquire(['{redlock}c'], HUGE))
      assert.ok(e instanceof ExecutionError)
      await checkAttempts(null, e.attempts, {
        size: 11,
        membership: 3,
        against: (s) => {
          assert.ok(s.votesAgainst.size >= 2)
          assert.ok(s.votesAgainst.has(b) && s.votesAgainst.has(c))
          void a
          for (const v of s.votesAgainst.values()) {
            assert.ok(v instanceof ResourceLockedError)
            assert.equal(v.message, locked(1))
          }
        },
      })
      // lockdog releases a failed attempt's partial hold in the background (the
      // caller is not held up by it); it is gone within the operation's bound.
      await waitFor(async () => (await a.get('{redlock}c')) === null, { what: 'the partial hold released' })
      assert.equal(await b.get('{redlock}c'), 'other1')
      assert.equal(await c.get('{redlock}c'), 'other2')
      await done(redlock, cs)
    },
  },
  {
    name: 'deliberate difference (a failed attempt leaves nothing behind): the member that voted for keeps voting for on retries',
    async body({ Redlock, name }) {
      const cs = await members(3)
      const [a, b, c] = cs
      const redlock = new Redlock(cs, { retryCount: 2, retryDelay: 30, retryJitter: 0 })
      await b.set('{redlock}f', 'other1')
      await c.set('{redlock}f', 'other2')
      const e = await rejection(redlock.acquire(['{redlock}f'], 10000))
      const stats = await statsOf(e.attempts)
      assert.deepEqual(who(stats[0].votesFor, cs), [0])
      void b
      void c
      // redlock leaves its first attempt's key on `a` until the retries end, so
      // `a` votes against its own leftover; lockdog releases a failed attempt's
      // partial hold at once.
      const later = stats.slice(1).map((s) => s.votesFor.has(a))
      if (name === 'redlock@5.0.0-beta.2') assert.deepEqual(later, [false, false])
      else assert.deepEqual(later, [true, true])
      await waitFor(async () => (await a.get('{redlock}f')) === null, { what: 'the partial hold released' })
      await done(redlock, cs)
    },
  },
  {
    name: 'two of three instances down for 600 ms, retryCount -1: acquires once they are back',
    async body({ Redlock }) {
      const cs = await members(3)
      const redlock = new Redlock(cs, { retryCount: -1 })
      await servers[1].kill()
      await servers[2].kill()
      const t0 = Date.now()
      const back = sleep(600).then(() => Promise.all([servers[1].start(), servers[2].start()]))
      let lock
      try {
        lock = await redlock.acquire(['{redlock}g'], 10000)
      } finally {
        // Whatever happened, the next tests get their servers back.
        await back
      }
      const took = Date.now() - t0
      assert.ok(took >= 550 && took < 5000, `took ${took} ms`)
      assert.ok(lock.attempts.length >= 1)
      const holders = await Promise.all(cs.map((c) => c.get('{redlock}g')))
      assert.ok(holders.filter((v) => v === lock.value).length >= 2, `holders ${holders}`)
      await lock.release()
      await done(redlock, cs)
    },
  },
  {
    name: 'a minority unreachable: acquire, extend and release succeed, and each attempt names the unreachable member',
    async body({ Redlock }) {
      await flush(servers)
      await servers[2].kill()
      const closed = { maxRetriesPerRequest: 0, autoResendUnfulfilledCommands: false, retryStrategy: () => null, reconnectOnError: () => false }
      const cs = [client(servers[0]), client(servers[1]), client(servers[2], closed)]
      open.push(...cs)
      const events = []
      try {
        const redlock = new Redlock(cs, { retryCount: 0 })
        redlock.on('error', (e) => events.push(e))
        const check = async (attempts) => {
          const [s] = await statsOf(attempts)
          assert.deepEqual(who(s.votesFor, cs), [0, 1])
          assert.deepEqual(who(s.votesAgainst, cs), [2])
          assert.equal(s.votesAgainst.get(cs[2]).message, 'Connection is closed.')
        }
        let lock = await redlock.acquire(['{redlock}m'], 10000)
        await check(lock.attempts)
        lock = await lock.extend(20000)
        await check(lock.attempts)
        assert.ok((await cs[0].pttl('{redlock}m')) > 10000)
        const { attempts } = await lock.release()
        await check(attempts)
        await gone(cs.slice(0, 2), '{redlock}m')
        assert.ok(events.length >= 3 && events.every((e) => e.message === 'Connection is closed.'), `${events.length} events`)
        await done(redlock, cs)
      } finally {
        await servers[2].start()
      }
    },
  },
  {
    name: 'a Lock rebuilt from its value extends and releases where it still holds; a member held by another owner votes against',
    async body({ Redlock, Lock, ResourceLockedError }) {
      const cs = await members(3)
      const [a, b, c] = cs
      const redlock = new Redlock(cs, { retryCount: 0 })
      const held = await redlock.acquire(['{redlock}r'], 10000)
      await eventually(async () => assert.equal(await c.get('{redlock}r'), held.value))
      await c.set('{redlock}r', 'someone else')
      const rebuilt = new Lock(redlock, ['{redlock}r'], held.value, [], held.expiration)
      const extended = await rebuilt.extend(20000)
      assert.equal(extended.value, held.value)
      assert.equal(rebuilt.expiration, 0)
      const [s] = await statsOf(extended.attempts)
      assert.deepEqual(who(s.votesFor, cs), [0, 1])
      assert.deepEqual(who(s.votesAgainst, cs), [2])
      assert.ok(s.votesAgainst.get(c) instanceof ResourceLockedError)
      assert.equal(s.votesAgainst.get(c).message, locked(1))
      await eventually(async () => {
        for (const x of [a, b]) assert.ok((await x.pttl('{redlock}r')) > 10000)
      })
      assert.equal(await c.get('{redlock}r'), 'someone else')
      assert.equal(await c.pttl('{redlock}r'), -1)
      const { attempts } = await extended.release()
      const [r] = await statsOf(attempts)
      assert.deepEqual(who(r.votesFor, cs), [0, 1])
      assert.deepEqual(who(r.votesAgainst, cs), [2])
      await gone([a, b], '{redlock}r')
      assert.equal(await c.get('{redlock}r'), 'someone else')
      await done(redlock, cs)
    },
  },
  {
    name: 'a Lock rebuilt from its value cannot be extended when a majority is held by another owner',
    async body({ Redlock, Lock, ExecutionError, ResourceLockedError }) {
      const cs = await members(3)
      const [a, b, c] = cs
      const redlock = new Redlock(cs, { retryCount: 2, retryDelay: 10, retryJitter: 0 })
      const held = await redlock.acquire(['{redlock}q'], 10000)
      await eventually(async () => assert.equal(await c.get('{redlock}q'), held.value))
      await b.set('{redlock}q', 'other1')
      await c.set('{redlock}q', 'other2')
      const rebuilt = new Lock(redlock, ['{redlock}q'], held.value, [], held.expiration)
      const e = await rejection(rebuilt.extend(20000))
      assert.ok(e instanceof ExecutionError)
      assert.equal(e.message, QUORUM_MESSAGE)
      await checkAttempts(null, e.attempts, {
        size: 3,
        membership: 3,
        against: (s) => {
          assert.deepEqual(who(s.votesFor, cs), [0])
          assert.deepEqual(who(s.votesAgainst, cs), [1, 2])
          for (const v of s.votesAgainst.values()) {
            assert.ok(v instanceof ResourceLockedError)
            assert.equal(v.message, locked(1))
          }
        },
      })
      // The member that still held the value was extended, as redlock's script does.
      assert.ok((await a.pttl('{redlock}q')) > 10000)
      assert.equal(await b.get('{redlock}q'), 'other1')
      assert.equal(await c.get('{redlock}q'), 'other2')
      // Its release deletes the value where it is held: a votes for once, then
      // (gone) against with the others; the foreign values stay.
      const r = await rejection(rebuilt.release())
      assert.ok(r instanceof ExecutionError)
      const stats = await checkAttempts(null, r.attempts, { size: 3, membership: 3 })
      assert.deepEqual(who(stats[0].votesFor, cs), [0])
      for (const s of stats.slice(1)) assert.deepEqual(who(s.votesAgainst, cs), [0, 1, 2])
      assert.equal(rebuilt.expiration, 0)
      assert.equal(await a.get('{redlock}q'), null)
      assert.equal(await b.get('{redlock}q'), 'other1')
      assert.equal(await c.get('{redlock}q'), 'other2')
      await done(redlock, cs)
    },
  },
  {
    name: 'exclusive across instances: a second Redlock on the same clients cannot take a held resource',
    async body({ Redlock, ExecutionError }) {
      const cs = await members(3)
      const one = new Redlock(cs, { retryCount: 1, retryDelay: 10 })
      const two = new Redlock(cs, { retryCount: 1, retryDelay: 10 })
      const lock = await one.acquire(['{redlock}h1', '{redlock}h2'], 10000)
      const e = await rejection(two.acquire(['{redlock}h2', '{redlock}h3'], 10000))
      assert.ok(e instanceof ExecutionError)
      await eventually(async () => {
        for (const c of cs) {
          assert.equal(await c.get('{redlock}h2'), lock.value)
          assert.equal(await c.get('{redlock}h3'), null)
        }
      })
      await lock.release()
      const again = await two.acquire(['{redlock}h2', '{redlock}h3'], 10000)
      await again.release()
      await one.quit().catch(() => {})
      await done(two, cs)
    },
  },
])

// Node crashes on an 'error' event without a listener. redlock keeps one of its
// own, but a program that calls removeAllListeners('error') (or a framework that
// does) then crashes on the first contended attempt; lockdog emits only to listeners.
compat('error events', [
  {
    name: 'deliberate difference (no crash on \'error\' without a listener): contended acquire after removeAllListeners',
    async body({ name }) {
      await flush(servers)
      const child = spawn(process.execPath, [path.join(__dirname, 'helpers', 'redlock-compat-child.js'), name, String(servers[0].port)], {
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      let out = ''
      child.stdout.on('data', (d) => { out += d })
      child.stderr.on('data', (d) => { out += d })
      const code = await new Promise((resolve) => child.on('exit', resolve))
      if (name === 'redlock@5.0.0-beta.2') {
        assert.notEqual(code, 0, out)
        assert.match(out, /ResourceLockedError|Unhandled error/)
      } else {
        assert.equal(code, 0, out)
        assert.match(out, /rejected ExecutionError/)
      }
    },
  },
])

// ioredis Cluster members: clusters of three masters started by the harness.
const clusters = []
function cluster(i) {
  clusters[i] ??= startCluster()
  return clusters[i]
}
after(async () => {
  for (const c of clusters) await stop(await c.catch(() => []))
})

/** A Cluster client per cluster, on clean clusters. */
async function clusterMembers(count) {
  const sets = await Promise.all(Array.from({ length: count }, (_, i) => cluster(i)))
  await Promise.all(sets.map(flush))
  const cs = sets.map((s) => clusterClient(s))
  open.push(...cs)
  return cs
}

compat('one ioredis Cluster member', [
  {
    name: 'acquires, extends and releases single and multi-resource locks (keys routed by slot)',
    async body({ Redlock }) {
      const [redis] = await clusterMembers(1)
      const redlock = new Redlock([redis])
      let lock = await redlock.acquire(['{redlock}a'], HUGE)
      assert.equal(await redis.get('{redlock}a'), lock.value)
      near(await redis.pttl('{redlock}a'), HUGE)
      lock = await lock.extend(3 * HUGE)
      near(await redis.pttl('{redlock}a'), 3 * HUGE)
      await lock.release()
      assert.equal(await redis.get('{redlock}a'), null)
      let multi = await redlock.acquire(['{redlock}a1', '{redlock}a2'], HUGE)
      for (const k of ['{redlock}a1', '{redlock}a2']) assert.equal(await redis.get(k), multi.value)
      multi = await multi.extend(3 * HUGE)
      for (const k of ['{redlock}a1', '{redlock}a2']) near(await redis.pttl(k), 3 * HUGE)
      await multi.release()
      assert.equal(await redis.exists('{redlock}a1', '{redlock}a2'), 0)
      await done(redlock, [redis])
    },
  },
  {
    name: 'single and overlapping multi-locks are exclusive',
    async body({ Redlock, ExecutionError, ResourceLockedError }) {
      const [redis] = await clusterMembers(1)
      const redlock = new Redlock([redis], { retryCount: 2, retryDelay: 20 })
      const lock = await redlock.acquire(['{redlock}c1', '{redlock}c2'], HUGE)
      for (const keys of [['{redlock}c1'], ['{redlock}c2', '{redlock}c3']]) {
        const e = await rejection(redlock.acquire(keys, HUGE))
        assert.ok(e instanceof ExecutionError)
        await checkAttempts(null, e.attempts, {
          size: 3,
          membership: 1,
          against: (s) => {
            assert.ok(s.votesAgainst.get(redis) instanceof ResourceLockedError)
            assert.equal(s.votesAgainst.get(redis).message, locked(keys.length))
          },
        })
      }
      assert.equal(await redis.get('{redlock}c3'), null)
      await lock.release()
      await done(redlock, [redis])
    },
  },
  {
    name: 'using acquires, extends past its duration, and releases',
    async body({ Redlock }) {
      const [redis] = await clusterMembers(1)
      const redlock = new Redlock([redis])
      const out = await redlock.using(['{redlock}x'], 600, { automaticExtensionThreshold: 100 }, async (signal) => {
        const value = await redis.get('{redlock}x')
        await sleep(900)
        assert.equal(signal.aborted, false)
        assert.equal(await redis.get('{redlock}x'), value)
        return value
      })
      assert.equal(typeof out, 'string')
      assert.equal(await redis.get('{redlock}x'), null)
      await done(redlock, [redis])
    },
  },
  {
    name: 'locks automatically expire',
    async body({ Redlock }) {
      const [redis] = await clusterMembers(1)
      const redlock = new Redlock([redis], { retryCount: 0 })
      const lock = await redlock.acquire(['{redlock}e'], 200)
      assert.equal(await redis.get('{redlock}e'), lock.value)
      await waitFor(async () => (await redis.exists('{redlock}e')) === 0, { timeout: 2000, what: 'expiry' })
      const lock2 = await redlock.acquire(['{redlock}e'], 200)
      assert.equal(await redis.get('{redlock}e'), lock2.value)
      assert.notEqual(lock2.value, lock.value)
      await lock2.release()
      assert.equal(await redis.get('{redlock}e'), null)
      await done(redlock, [redis])
    },
  },
  {
    name: 'using is exclusive: concurrent routines on one resource never overlap',
    async body({ Redlock }) {
      const [redis] = await clusterMembers(1)
      const redlock = new Redlock([redis])
      let inside = 0
      let most = 0
      const routine = async (signal) => {
        inside++
        most = Math.max(most, inside)
        const value = await redis.get('{redlock}y')
        await sleep(400)
        assert.equal(signal.aborted, false)
        assert.equal(signal.error, undefined)
        assert.equal(await redis.get('{redlock}y'), value)
        inside--
        return value
      }
      const settings = { automaticExtensionThreshold: 100 }
      const [a, b] = await Promise.all([
        redlock.using(['{redlock}y'], 1000, settings, routine),
        redlock.using(['{redlock}y'], 1000, settings, routine),
      ])
      assert.equal(most, 1)
      assert.notEqual(a, b)
      assert.equal(await redis.get('{redlock}y'), null)
      await done(redlock, [redis])
    },
  },
])

compat('three ioredis Cluster members', [
  {
    name: 'acquires, extends and releases a single lock on every cluster',
    async body({ Redlock }) {
      const cs = await clusterMembers(3)
      const redlock = new Redlock(cs)
      let lock = await redlock.acquire(['{redlock}a'], HUGE)
      await eventually(async () => {
        for (const c of cs) {
          assert.equal(await c.get('{redlock}a'), lock.value)
          near(await c.pttl('{redlock}a'), HUGE)
        }
      })
      await checkAttempts(null, lock.attempts, { size: 1, membership: 3, against: (s) => assert.deepEqual(who(s.votesFor, cs), [0, 1, 2]) })
      lock = await lock.extend(3 * HUGE)
      await eventually(async () => {
        for (const c of cs) {
          assert.equal(await c.get('{redlock}a'), lock.value)
          near(await c.pttl('{redlock}a'), 3 * HUGE)
        }
      })
      await lock.release()
      await gone(cs, '{redlock}a')
      await done(redlock, cs)
    },
  },
  {
    name: 'succeeds when a minority of clusters hold the resource, and leaves their value and PTTL alone',
    async body({ Redlock, ResourceLockedError }) {
      const cs = await clusterMembers(3)
      const [a, b, c] = cs
      const redlock = new Redlock(cs)
      await c.set('{redlock}b', 'other')
      let lock = await redlock.acquire(['{redlock}b'], HUGE)
      await eventually(async () => {
        for (const x of [a, b]) {
          assert.equal(await x.get('{redlock}b'), lock.value)
          near(await x.pttl('{redlock}b'), HUGE)
        }
      })
      assert.equal(await c.get('{redlock}b'), 'other')
      assert.equal(await c.pttl('{redlock}b'), -1)
      const [s] = await statsOf(lock.attempts)
      assert.deepEqual(who(s.votesFor, cs), [0, 1])
      assert.ok(s.votesAgainst.get(c) instanceof ResourceLockedError)
      lock = await lock.extend(3 * HUGE)
      await eventually(async () => {
        for (const x of [a, b]) near(await x.pttl('{redlock}b'), 3 * HUGE)
      })
      assert.equal(await c.get('{redlock}b'), 'other')
      assert.equal(await c.pttl('{redlock}b'), -1)
      await lock.release()
      await gone([a, b], '{redlock}b')
      assert.equal(await c.get('{redlock}b'), 'other')
      await done(redlock, cs)
    },
  },
  {
    name: 'fails when a majority of clusters hold the resource: 11 attempts of ResourceLockedError votes, nothing left behind',
    async body({ Redlock, ExecutionError, ResourceLockedError }) {
      const cs = await clusterMembers(3)
      const [a, b, c] = cs
      const redlock = new Redlock(cs)
      await b.set('{redlock}c', 'other1')
      await c.set('{redlock}c', 'other2')
      const e = await rejection(redlock.acquire(['{redlock}c'], HUGE))
      assert.ok(e instanceof ExecutionError)
      await checkAttempts(null, e.attempts, {
        size: 11,
        membership: 3,
        against: (s) => {
          assert.ok(s.votesAgainst.has(b) && s.votesAgainst.has(c))
          for (const v of s.votesAgainst.values()) {
            assert.ok(v instanceof ResourceLockedError)
            assert.equal(v.message, locked(1))
          }
        },
      })
      await waitFor(async () => (await a.get('{redlock}c')) === null, { what: 'the partial hold released' })
      assert.equal(await b.get('{redlock}c'), 'other1')
      assert.equal(await c.get('{redlock}c'), 'other2')
      await done(redlock, cs)
    },
  },
])

compat('a plain instance and two ioredis Cluster members', [
  {
    name: 'acquires, extends and releases a multi-resource lock; a cluster holding it votes against',
    async body({ Redlock, ResourceLockedError }) {
      await flush(servers)
      const plain = client(servers[0])
      open.push(plain)
      const cs = [plain, ...await clusterMembers(2)]
      const [, b, c] = cs
      const redlock = new Redlock(cs)
      const keys = ['{redlock}m1', '{redlock}m2']
      let lock = await redlock.acquire(keys, HUGE)
      await eventually(async () => {
        for (const x of cs) for (const k of keys) assert.equal(await x.get(k), lock.value)
      })
      lock = await lock.extend(3 * HUGE)
      await eventually(async () => {
        for (const x of cs) for (const k of keys) near(await x.pttl(k), 3 * HUGE)
      })
      await lock.release()
      for (const k of keys) await gone(cs, k)
      await c.set('{redlock}m2', 'other')
      lock = await redlock.acquire(keys, 10000)
      const [s] = await statsOf(lock.attempts)
      assert.deepEqual(who(s.votesFor, cs), [0, 1])
      assert.deepEqual(who(s.votesAgainst, cs), [2])
      assert.ok(s.votesAgainst.get(c) instanceof ResourceLockedError)
      assert.equal(s.votesAgainst.get(c).message, locked(2))
      await eventually(async () => assert.equal(await b.get('{redlock}m1'), lock.value))
      assert.equal(await c.get('{redlock}m1'), null)
      assert.equal(await c.get('{redlock}m2'), 'other')
      await lock.release()
      await done(redlock, cs)
    },
  },
])
