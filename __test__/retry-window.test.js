'use strict'

// What retryCount and retryDelay bound: with a retryCount, every pause between
// attempts is at most retryDelay + retryJitter (a release notice may end it
// sooner), so the wait for a held lock ends after about
// retryCount × (retryDelay + retryJitter) — not at the holder's TTL. Without
// one, waiting stays notice-driven, bounded by waitTimeout. Both paths (the
// tokio one with LOCKDOG_FAST_PATH=0).

const { test, describe, before, after, afterEach } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedis, sleep, waitFor, lockClient } = require('./helpers')

let srv
let clients = []

before(async () => {
  srv = await startRedis()
})

after(async () => {
  await srv.stop()
})

afterEach(async () => {
  await Promise.all(clients.map((c) => c.close()))
  clients = []
})

function client(fast, options = {}) {
  const locks = lockClient(fast, { url: srv.url, ...options })
  clients.push(locks)
  return locks
}

/** Per attempt on loopback, on a loaded machine: a round trip and a scheduling delay. */
const PER_ATTEMPT = 150

for (const fast of [true, false]) {
  describe(fast ? 'fast path' : 'tokio path (LOCKDOG_FAST_PATH=0)', () => {
    test('retryCount: 2, retryDelay: 10 against a held, renewed lock: ERR_LOCK_TAKEN after ~2 × (10 + jitter), not at its TTL', async () => {
      const holder = client(fast)
      const locks = client(fast)
      const key = `rw:count2:${fast}`
      const held = await holder.acquire(key, { ttl: 5000 })
      // Twice: the second time this client already listens for the key's release notices.
      for (let round = 0; round < 2; round++) {
        const t0 = performance.now()
        const err = await locks.acquire(key, { retryCount: 2, retryDelay: 10 }).then(() => assert.fail('acquired a held lock'), (e) => e)
        const took = performance.now() - t0
        assert.equal(err.code, 'ERR_LOCK_TAKEN', err.message)
        assert.equal(err.attempts, 3)
        assert.match(err.message, /\(3 attempt\(s\)\)/)
        const window = 2 * (10 + 100) // retryCount × (retryDelay + the default retryJitter)
        assert.ok(took <= window + 3 * PER_ATTEMPT, `round ${round}: rejected after ${Math.round(took)} ms (window ${window} ms)`)
      }
      assert.equal(held.held, true)
      await held.release()
    })

    test('retryCount: 5, retryDelay: 100, retryJitter: 0: six attempts, about 500 ms, well within waitTimeout', async () => {
      const holder = client(fast)
      const locks = client(fast)
      const key = `rw:count5:${fast}`
      const held = await holder.acquire(key, { ttl: 5000 })
      const t0 = performance.now()
      const err = await locks.acquire(key, { retryCount: 5, retryDelay: 100, retryJitter: 0, waitTimeout: 10_000 })
        .then(() => assert.fail('acquired a held lock'), (e) => e)
      const took = performance.now() - t0
      assert.equal(err.code, 'ERR_LOCK_TAKEN', err.message)
      assert.equal(err.attempts, 6)
      // Each pause is retryDelay, or shorter when the holder's lease ends sooner (it does not here).
      assert.ok(took >= 5 * 100 - 20, `rejected after ${Math.round(took)} ms: pauses shorter than retryDelay`)
      assert.ok(took <= 5 * 100 + 6 * PER_ATTEMPT, `rejected after ${Math.round(took)} ms`)
      await held.release()
    })

    test('with a retryCount, a release notice still ends a pause early', async () => {
      const holder = client(fast)
      const locks = client(fast)
      const key = `rw:notice:${fast}`
      const held = await holder.acquire(key, { ttl: 10_000 })
      const t0 = performance.now()
      const pending = locks.acquire(key, { retryCount: 3, retryDelay: 3000, retryJitter: 0 })
      // The waiter subscribes to the key's release notices during its first pause.
      const redis = new Redis(srv.url)
      try {
        await waitFor(async () => (await redis.pubsub('NUMSUB', `__lockdog:released:${key}`))[1] === 1, { what: 'the subscription' })
      } finally {
        redis.disconnect()
      }
      await held.release()
      const lock = await pending
      const took = performance.now() - t0
      assert.ok(took < 3000, `woken after ${Math.round(took)} ms, not by the notice`)
      assert.equal(lock.attempts, 2)
      await lock.release()
    })

    test('without a retryCount, waiting stays notice-driven: no polling every retryDelay', async () => {
      const holder = client(fast)
      const locks = client(fast)
      const key = `rw:default:${fast}`
      const held = await holder.acquire(key, { ttl: 10_000 })
      const pending = locks.acquire(key, { retryDelay: 10, retryJitter: 0, waitTimeout: 10_000 })
      await sleep(1000)
      await held.release()
      const lock = await pending
      // Polling every 10 ms would have made ~100 attempts in that second.
      assert.ok(lock.attempts <= 4, `attempts: ${lock.attempts}`)
      await lock.release()
    })

    test('ERR_LOCK_TIMEOUT: the attempt count in the message is err.attempts', async () => {
      const holder = client(fast)
      const locks = client(fast)
      const key = `rw:timeout:${fast}`
      const held = await holder.acquire(key, { ttl: 5000 })
      for (const opts of [{ waitTimeout: 300 }, { waitTimeout: 300, retryDelay: 20, retryJitter: 0 }, { waitTimeout: 300, retryCount: 1000, retryDelay: 20 }]) {
        const err = await locks.acquire(key, opts).then(() => assert.fail('acquired a held lock'), (e) => e)
        assert.equal(err.code, 'ERR_LOCK_TIMEOUT', err.message)
        const counted = /\((\d+) attempt\(s\)\)/.exec(err.message)
        assert.ok(counted, err.message)
        assert.equal(Number(counted[1]), err.attempts, `${JSON.stringify(opts)}: ${err.message} / attempts ${err.attempts}`)
      }
      await held.release()
    })
  })
}
