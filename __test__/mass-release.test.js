'use strict'

// A burst of releases on a server that has not run the release script (its
// cache flushed after the locks were taken): every release succeeds, the
// script goes at most once per connection by body and never through SCRIPT
// LOAD. Both paths.

const { test, after } = require('node:test')
const assert = require('node:assert/strict')
const { serverAndClient, commandStats, lockClient } = require('./helpers')

const N = Number(process.env.LOCKDOG_MASS_RELEASE || 20000)
let server
let probe

serverAndClient({}, (s) => ({ server, redis: probe } = s))

for (const fastPath of [true, false]) {
  const path = fastPath ? 'fast path' : 'tokio path'
  test(`${N} releases at once after a SCRIPT FLUSH all succeed, one script body per connection (${path})`, async () => {
    const c = lockClient(fastPath, { url: server.url, commandTimeout: 5000 })
    try {
      const prefix = `mr:${fastPath ? 'f' : 't'}:`
      const locks = []
      for (let i = 0; i < N; i += 1000) {
        const batch = []
        for (let j = i; j < Math.min(N, i + 1000); j++) batch.push(c.acquire(prefix + j, { ttl: 60000 }))
        locks.push(...(await Promise.all(batch)))
      }
      await probe.script('FLUSH')
      await probe.config('RESETSTAT')
      const results = await Promise.allSettled(locks.map((l) => l.release()))
      const failed = results.filter((r) => r.status !== 'fulfilled' || r.value !== true)
      assert.equal(failed.length, 0, `every release succeeds (${failed.length} did not: ${failed[0]?.reason?.code ?? failed[0]?.value})`)
      const stats = await commandStats(probe)
      assert.equal(Number(await probe.eval(`return #redis.call('keys', ARGV[1])`, 0, `${prefix}*`)), 0, 'every key is gone')
      // (`script` on servers older than Redis 7, which count subcommands under it)
      assert.equal((stats['script|load'] ?? stats.script)?.calls ?? 0, 0, 'no SCRIPT LOAD')
      const evals = stats.eval?.calls ?? 0
      // The shared connection and, on the fast path, the fast one.
      assert.ok(evals <= 2, `the release script's body at most once per connection (${evals})`)
      const noscript = stats.evalsha?.failed ?? 0
      // Only calls already in flight on the fast connection when it learned of the
      // flush are answered NOSCRIPT (once each); the shared connection sends the
      // script by body first.
      assert.ok(noscript <= (fastPath ? N : 1), `NOSCRIPT answers (${noscript})`)
    } finally {
      await c.close()
    }
  })
}
