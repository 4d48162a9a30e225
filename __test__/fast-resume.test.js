'use strict'

// An attempt that does not take the lock is judged once and undone once: the
// acquisition goes on from its verdict (pause, next attempt, or the error)
// without undoing it again. Counted on the node
// that granted it, with MONITOR (every attempt and undo is one lock command
// there: a script call, or a first attempt's SET NX PX). Redlock on three nodes, two of them held by another;
// the tokio path (LOCKDOG_FAST_PATH=0) counts the same.

const { test, before, after, afterEach, describe } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis, inspector, waitFor, lockClient, commandLog } = require('./helpers')

let servers = []
let probes = []
let clients = []

before(async () => {
  servers = await Promise.all([0, 1, 2].map(() => startRedis()))
  probes = servers.map((s) => inspector(s))
})

after(async () => {
  probes.forEach((p) => p.disconnect())
  await Promise.all(servers.map((s) => s.stop()))
})

afterEach(async () => {
  await Promise.all(clients.map((c) => c.close()))
  clients = []
})

/** Uses the client until every node has its fast connection (with `fast`). */
async function warm(locks, fast) {
  await waitFor(async () => {
    await (await locks.acquire(`warm:${Math.random()}`, { ttl: 2000 })).release()
    const lists = await Promise.all(probes.map((p) => p.client('LIST')))
    return !fast || lists.every((l) => l.includes('name=lockdog-fast'))
  }, { what: 'fast connections', timeout: 10000 })
}

async function makeClient(fast) {
  const locks = lockClient(fast, { nodes: servers.map((s) => s.url) })
  clients.push(locks)
  await warm(locks, fast)
  return locks
}

for (const fast of [true, false]) {
  describe(fast ? 'fast path' : 'tokio path (LOCKDOG_FAST_PATH=0)', () => {
    const newClient = () => makeClient(fast)

    test('a first attempt that wins one node of three is undone there once (retryCount 0)', async (t) => {
      const locks = await newClient()
      const key = `resume:${Math.random()}`
      await Promise.all(probes.slice(1).map((p) => p.set(key, 'other', 'PX', 5000)))
      const log = await commandLog(probes[0])
      t.after(log.stop)
      await assert.rejects(locks.acquire(key, { ttl: 2000, retryCount: 0 }), (e) => {
        assert.equal(e.code, 'ERR_LOCK_TAKEN')
        assert.equal(e.attempts, 1)
        return true
      })
      await waitFor(async () => (await probes[0].exists(key)) === 0, { what: 'the undo' })
      await locks.settled() // any undo still owed has been sent and answered
      // The attempt and one undo.
      await waitFor(() => log.lockCalls() >= 2, { what: 'the attempt and its undo on the monitor' })
      assert.equal(log.lockCalls(), 2)
    })

    test('with retries the loop goes on from the first attempt and takes the lock once released', async (t) => {
      const locks = await newClient()
      const key = `resume:${Math.random()}`
      await Promise.all(probes.slice(1).map((p) => p.set(key, 'other', 'PX', 5000)))
      const log = await commandLog(probes[0])
      t.after(log.stop)
      const pending = locks.acquire(key, { ttl: 2000, retryDelay: 100, retryJitter: 0 })
      // A second attempt (attempt, undo, attempt) before the other owner goes.
      await waitFor(() => log.lockCalls() >= 3, { what: 'a second attempt' })
      await Promise.all(probes.slice(1).map((p) => p.del(key)))
      const lock = await pending
      assert.ok(lock.attempts >= 2, `attempts ${lock.attempts}`)
      // Each attempt, and one undo for each that failed (the last attempt may
      // have been decided before this node's answer).
      const expected = 2 * lock.attempts - 1
      await waitFor(() => log.lockCalls() >= expected, { what: 'the last attempt' })
      await locks.settled()
      assert.equal(log.lockCalls(), expected)
      assert.equal(await lock.release(), true)
    })
  })
}
