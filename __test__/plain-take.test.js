'use strict'

// A lock of one key without fencing takes its first attempt with plain commands,
// `SET key token NX PX ttl`, and `PTTL key` only when the SET found the key taken
// (the holder's lease), not the acquire script; every other lock, and every retry, runs the
// script. Counted with INFO commandstats on a server of the file's own, on both
// drivers.

const { test, before, after, describe } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis, inspector, lockClient, commandsOf, waitFor } = require('./helpers')

let server
let probe

before(async () => {
  server = await startRedis()
  probe = inspector(server)
})

after(async () => {
  probe.disconnect()
  await server.stop()
})

/** Calls per command that `step` made the server run. */
const counted = (step) => commandsOf(probe, step)

for (const fast of [true, false]) {
  describe(fast ? 'JS-loop driver' : 'tokio driver (LOCKDOG_FAST_PATH=0)', () => {
    async function client(options = {}) {
      const locks = lockClient(fast, { url: server.url, ...options })
      // Connections (and, on tokio, the script cache) warm before counting.
      await waitFor(async () => {
        await (await locks.acquire(`plain:warm:${Math.random()}`, { ttl: 2000 })).release()
        return true
      }, { what: 'a warm client' })
      return locks
    }

    test('a lock of one key takes its first attempt with SET NX PX, no script', async () => {
      const locks = await client()
      const key = `plain:one:${fast}`
      let lock
      const acquired = await counted(async () => {
        lock = await locks.acquire(key, { ttl: 5000 })
      })
      assert.deepEqual(acquired, { set: 1 }, 'the SET alone: no PTTL when it takes the key')
      assert.equal(await probe.get(key), lock.token)
      const pttl = await probe.pttl(key)
      assert.ok(pttl > 4000 && pttl <= 5000, `PX as asked: ${pttl}`)
      assert.equal(lock.attempts, 1)
      // Released by the token-checked script (or, on the JS-loop driver and a
      // server that has it, DELIFEQ: __test__/script-free.test.js).
      const released = await counted(async () => assert.equal(await lock.release(), true))
      assert.equal((released.evalsha ?? released.eval ?? 0) + (released.delifeq ?? 0), 1)
      assert.equal(released.set ?? 0, 0)
      await locks.close()
    })

    test('a key held by another owner: the PTTL read after the SET\'s nil says for how long', async () => {
      const locks = await client()
      const key = `plain:held:${fast}`
      await probe.set(key, 'someone', 'PX', 8000)
      let error
      const tried = await counted(async () => {
        error = await locks.acquire(key, { ttl: 5000, retryCount: 0 }).catch((e) => e)
      })
      assert.equal(error.code, 'ERR_LOCK_TAKEN')
      assert.equal(error.attempts, 1)
      assert.ok(error.remainingMs > 6000 && error.remainingMs <= 8000, `remainingMs ${error.remainingMs}`)
      assert.match(error.message, /for another \d+ ms/)
      assert.deepEqual(tried, { set: 1, pttl: 1 }, 'nothing taken, nothing to undo')
      assert.equal(await probe.get(key), 'someone')
      await locks.close()
    })

    test('the retries of a contended lock run the script (its token may have landed)', async () => {
      const locks = await client()
      const key = `plain:retry:${fast}`
      await probe.set(key, 'someone', 'PX', 300)
      let lock
      const stats = await counted(async () => {
        lock = await locks.acquire(key, { ttl: 5000, retryDelay: 50, retryJitter: 0, waitTimeout: 5000 })
      })
      assert.ok(lock.attempts >= 2, `attempts ${lock.attempts}`)
      assert.equal(stats.pttl >= 1 && stats.set >= 1, true)
      // One plain attempt; every later one a script call (no undo: nothing was taken).
      assert.equal((stats.evalsha ?? 0) + (stats.eval ?? 0), lock.attempts - 1)
      assert.equal(await probe.get(key), lock.token)
      assert.equal(await lock.release(), true)
      await locks.close()
    })

    test('fencing, two keys and a semaphore keep the script from the first attempt', async () => {
      const fenced = await client({ fencing: true })
      const plain = await client()
      for (const [what, take] of [
        ['fencing', () => fenced.acquire(`plain:fenced:${fast}`, { ttl: 5000 })],
        ['two keys', () => plain.acquire([`plain:{a}:1:${fast}`, `plain:{a}:2:${fast}`], { ttl: 5000 })],
        ['a semaphore', () => plain.semaphore(`plain:sem:${fast}`, { limit: 2 }).acquire({ ttl: 5000 })],
      ]) {
        let lock
        const stats = await counted(async () => {
          lock = await take()
        })
        assert.equal((stats.evalsha ?? 0) + (stats.eval ?? 0), 1, `${what}: one script call`)
        // (A semaphore's script reads a PTTL of its own.)
        if (what !== 'a semaphore') assert.equal(stats.pttl ?? 0, 0, `${what}: no plain take`)
        assert.equal(await lock.release(), true)
      }
      await fenced.close()
      await plain.close()
    })
  })
}
