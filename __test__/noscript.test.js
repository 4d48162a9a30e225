'use strict'

// A server that has not run lockdog's scripts (fresh, restarted, SCRIPT
// FLUSH) costs no extra round trip: a connection's first call of a script
// sends the script itself (the fast path loads its scripts in its handshake),
// and an EVALSHA answered NOSCRIPT goes again once as EVAL, never as SCRIPT
// LOAD + EVALSHA. Both paths.

const { test, before, after, describe } = require('node:test')
const assert = require('node:assert/strict')
const { FaultProxy } = require('./faults/proxy')
const { serverAndClient, commandStats, waitFor, lockClient } = require('./helpers')

let server
let probe

serverAndClient({}, (s) => ({ server, redis: probe } = s))

const count = (stats, cmd, field = 'calls') => stats[cmd]?.[field] ?? 0
// Redis 7 counts SCRIPT LOAD as `script|load`; older servers count every SCRIPT
// subcommand as `script` (lockdog sends no other, and the probe's FLUSH comes
// before each RESETSTAT).
const scriptLoads = (stats) => count(stats, stats['script|load'] ? 'script|load' : 'script')

/** A client made with the fast path on or off (read when it is made). */
const client = lockClient

/** Waits until the client's fast connection is up (its name shows on the server). */
async function fastReady(c) {
  await waitFor(async () => {
    const probeLock = await c.acquire(`ns:warm:${Math.random()}`, { ttl: 5000 })
    await probeLock.release()
    return / name=lockdog-fast /.test(await probe.client('LIST'))
  }, { timeout: 10000, what: 'the fast connection' })
}

for (const fastPath of [true, false]) {
  const path = fastPath ? 'fast path' : 'tokio path'
  describe(path, () => {
    test(`through 600 ms of reply latency on a flushed server a lock is renewed and held, and extend() succeeds (${path})`, async () => {
      const proxy = await new FaultProxy(server.port).start()
      const c = client(fastPath, { url: proxy.url, commandTimeout: 1000, connectTimeout: 3000 })
      c.on('error', () => {})
      try {
        await probe.script('FLUSH')
        proxy.latencyDown = 600
        const lock = await c.acquire('ns:slow', { ttl: 1500 })
        const lost = []
        c.on('lost', (e) => lost.push(e))
        // Two TTLs later it is still ours: renewals went through at once.
        await new Promise((r) => setTimeout(r, 3000))
        assert.deepEqual(lost, [])
        assert.equal(lock.held, true)
        assert.equal(await probe.get('ns:slow'), lock.token)
        assert.ok((await probe.pttl('ns:slow')) > 0)
        // A manual extend there (the issue: ERR_LOCK_LOST after 1 s with validity left).
        await lock.extend(1500)
        assert.equal(lock.held, true)
        assert.deepEqual(lost, [])
        assert.equal(await lock.release(), true)
      } finally {
        proxy.latencyDown = 0
        await c.close()
        proxy.close()
      }
    })

    test(`after a flush an extend costs one extra round trip, each reply bounded by commandTimeout on its own (${path})`, async () => {
      const proxy = await new FaultProxy(server.port).start()
      const c = client(fastPath, { url: proxy.url, commandTimeout: 1000, connectTimeout: 3000 })
      c.on('error', () => {})
      try {
        if (fastPath) await fastReady(c)
        // Two keys: the extend script on every server (a lock of one key is
        // extended with SET … IFEQ where the server has it).
        const lock = await c.acquire(['ns:{once}', 'ns:{once}:2'], { ttl: 6000, autoRenew: false })
        await lock.extend(6000) // the script is known on this connection
        await probe.script('FLUSH')
        proxy.latencyDown = 600
        const t0 = performance.now()
        await lock.extend(6000) // EVALSHA, NOSCRIPT, EVAL: 1.2 s, each reply in 0.6 s
        const took = performance.now() - t0
        assert.ok(took >= 1100, `two round trips (${Math.round(took)} ms)`)
        assert.ok((await probe.pttl('ns:{once}')) > 5000)
        proxy.latencyDown = 0
        assert.equal(await lock.release(), true)
      } finally {
        proxy.latencyDown = 0
        await c.close()
        proxy.close()
      }
    })

    test(`a fresh server costs no SCRIPT LOAD and no NOSCRIPT; after a flush, one script body per connection (${path})`, async () => {
      // Nothing cached when the client first connects.
      await probe.script('FLUSH')
      await probe.config('RESETSTAT')
      const c = client(fastPath, { url: server.url })
      try {
        if (fastPath) await fastReady(c)
        const round = async (tag) => {
          const locks = []
          for (let i = 0; i < 20; i++) locks.push(await c.acquire(`ns:${tag}:${i}`, { ttl: 5000 }))
          for (let i = 0; i < 20; i++) locks.push(c.acquire(`ns:${tag}:p${i}`, { ttl: 5000 }))
          const held = await Promise.all(locks)
          await Promise.all(held.map((l) => l.extend(6000)))
          assert.deepEqual(await Promise.all(held.map((l) => l.release())), held.map(() => true))
        }
        await round('fresh')
        let stats = await commandStats(probe)
        // The fast handshake loads the four scripts the fast path sends (acquire, release, extend,
        // a semaphore's acquire); nothing else loads any.
        assert.equal(scriptLoads(stats), fastPath ? 4 : 0, 'only the fast handshake loads scripts')
        assert.equal(count(stats, 'evalsha', 'failed'), 0, 'no NOSCRIPT on a server that had not seen the scripts')
        assert.ok(count(stats, 'eval') <= 3, `each script sent at most once by body (${count(stats, 'eval')})`)
        // The acquires' first attempts are plain SET NX PX (and PTTL), no script.
        assert.ok(count(stats, 'set') >= 40, 'every acquire took its key with plain commands')
        // The rest go by hash, or (on the fast path, where the server has
        // them) as DELIFEQ and SET … IFEQ (the SETs beyond the 40 takes').
        const byHash = count(stats, 'evalsha') + count(stats, 'delifeq') + count(stats, 'set') - 40
        assert.ok(byHash >= 75, `the rest go by hash (${byHash})`)
        // Flushed under the open connections: what was in flight is sent again
        // once; a script's body goes at most once per connection.
        await probe.script('FLUSH')
        await probe.config('RESETSTAT')
        await round('flushed')
        stats = await commandStats(probe)
        assert.equal(scriptLoads(stats), 0, 'no SCRIPT LOAD per call')
        // Each call is answered NOSCRIPT at most once: the first sequential
        // acquire, and the 40 extends and 40 releases sent at once.
        const failed = count(stats, 'evalsha', 'failed')
        assert.ok(failed <= 81, `at most one NOSCRIPT per call (${failed})`)
        const evals = count(stats, 'eval')
        if (fastPath) {
          // The fast connection sends a script's body once; the calls in flight
          // behind it go again by hash (the tokio connection: what it sent).
          assert.ok(evals <= 3 + 3, `one body per script and connection (${evals})`)
        } else {
          assert.ok(evals <= failed, `each NOSCRIPT sent again once as EVAL (${evals})`)
        }
      } finally {
        await c.close()
      }
    })
  })
}
