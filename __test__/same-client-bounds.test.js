'use strict'

// One client's callers of one key go in call order, yet each keeps its own bound:
// a caller behind another with a retryCount pauses at most retryDelay + retryJitter
// and rejects after its own attempts, and during an outage a later caller's single
// attempt (tryAcquire) is not held back until the earlier caller's wait ends.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { serverAndClient, freePort, loopLag, lockClient } = require('./helpers')

let server
serverAndClient({}, (s) => ({ server } = s))

for (const fastPath of [true, false]) {
  const path = fastPath ? 'fast path' : 'tokio path'
  const client = (options) => lockClient(fastPath, options)

  test(`two same-tick callers with retryCount behind a held lock both reject after their own retries (${path})`, async () => {
    const holder = client({ url: server.url })
    const commandTimeout = 500
    const c = client({ url: server.url, commandTimeout })
    const lag = loopLag()
    try {
      const held = await holder.acquire(`scb:${path}`, { ttl: 5000 })
      const opts = { retryCount: 2, retryDelay: 10, retryJitter: 0 }
      const t0 = performance.now()
      const results = await Promise.allSettled([c.acquire(`scb:${path}`, opts), c.acquire(`scb:${path}`, opts)])
      const took = performance.now() - t0
      for (const r of results) {
        assert.equal(r.status, 'rejected')
        assert.equal(r.reason.code, 'ERR_LOCK_TAKEN', r.reason.message)
      }
      // Each caller: 3 attempts, each bounded by commandTimeout, 2 pauses of retryDelay;
      // the second goes after the first's first attempt.
      const bound = 4 * commandTimeout + 2 * opts.retryDelay + lag.max()
      assert.ok(took < bound, `both rejected after ${Math.round(took)} ms (bound ${Math.round(bound)} ms), not at the holder's TTL`)
      await held.release()
    } finally {
      lag.stop()
      await holder.close()
      await c.close()
    }
  })

  test(`during an outage a later caller's tryAcquire fails at once, not after the earlier caller's wait (${path})`, async () => {
    const connectTimeout = 300
    const c = client({ url: `redis://127.0.0.1:${await freePort()}`, connectTimeout, commandTimeout: 300 })
    const lag = loopLag()
    try {
      const waiting = c.acquire('scb:down', { waitTimeout: 3000 })
      const t0 = performance.now()
      const once = c.tryAcquire('scb:down')
      await assert.rejects(once, (e) => e.code === 'ERR_LOCK_CONNECTION')
      const took = performance.now() - t0
      // Behind the first caller's first attempt, then its own: two connection attempts.
      const bound = 2 * connectTimeout + lag.max() + 200
      assert.ok(took < bound, `tryAcquire rejected after ${Math.round(took)} ms (bound ${Math.round(bound)} ms), not after the other caller's waitTimeout`)
      await assert.rejects(waiting, (e) => e.code === 'ERR_LOCK_CONNECTION')
    } finally {
      lag.stop()
      await c.close()
    }
  })
}
