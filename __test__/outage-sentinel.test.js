'use strict'

// Riding through a Sentinel failover: the master killed while an acquire
// waits; the acquire retries through "no master" and refused connections
// until the sentinels name the promoted replica, and takes the lock there.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { LockClient } = require('..')
const { sleep, waitFor } = require('./helpers')
const { startSentinels, call } = require('./helpers/sentinel')

for (const fast of [true, false]) {
  test(`the master killed while acquire waits: the lock is taken on the promoted replica (${fast ? 'fast path' : 'LOCKDOG_FAST_PATH=0'})`, async (t) => {
    // A deployment of its own per case: no case waits for the last one's killed
    // master to rejoin.
    const topology = await startSentinels()
    t.after(() => topology.stop())
    if (!fast) process.env.LOCKDOG_FAST_PATH = '0'
    let c
    try {
      c = new LockClient({ sentinel: { sentinels: topology.urls, name: topology.name }, connectTimeout: 1000, commandTimeout: 500 })
    } finally {
      delete process.env.LOCKDOG_FAST_PATH
    }
    c.on('error', () => {})
    try {
      const master = topology.server(await topology.masterPort())
      const other = master === topology.master ? topology.replica : topology.master
      await (await c.acquire('so:warm', { ttl: 2000 })).release()
      const t0 = performance.now()
      await master.kill()
      // down-after-milliseconds is 1000; the election and promotion follow. The
      // budget is what a failover takes on a loaded machine, with room to spare.
      const pending = c.acquire(`so:after:${fast}`, { ttl: 5000, waitTimeout: 30_000 })
      const settled = pending.then(() => 'resolved', (e) => e)
      await sleep(500)
      assert.equal(await Promise.race([settled, sleep(0).then(() => 'pending')]), 'pending', 'still waiting while no master answers')
      const lock = await pending
      t.diagnostic(`master SIGKILL -> lock on the promoted replica: ${Math.round(performance.now() - t0)} ms, ${lock.attempts} attempts`)
      assert.equal(await call(other.port, 'GET', lock.key), lock.token)
      // The client may have heard of the promotion from one sentinel; the others
      // learn it from their peers' hello messages, a second or two later.
      for (let i = 0; i < topology.sentinels.length; i++) {
        await waitFor(async () => (await topology.masterPort(i)) === other.port,
          { timeout: 20000, interval: 100, what: `sentinel ${i} to name the promoted replica` })
      }
      assert.equal(await lock.release(), true)
    } finally {
      await c.close()
    }
  })
}
