'use strict'

// Riding through an outage: a node that is down, restarting or failing over
// while an acquire waits is waited out like a held lock — within waitTimeout,
// retryCount and the signal — and past that budget the caller gets the
// outage's own typed error with its last cause. tryAcquire still fails at once.
// Every test runs on both paths (the tokio one with LOCKDOG_FAST_PATH=0).

const { test, describe, after, afterEach } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis, inspector, waitFor, sleep, lockClient } = require('./helpers')

let clients = []
const servers = []

afterEach(async () => {
  await Promise.all(clients.map((c) => c.close()))
  clients = []
})

after(async () => {
  await Promise.all(servers.map((s) => s.stop()))
})

function client(fast, options) {
  const locks = lockClient(fast, options)
  clients.push(locks)
  return locks
}

async function server() {
  const s = await startRedis()
  servers.push(s)
  return s
}

/** Uses the client once, so its connections are open before the outage. */
async function warm(locks) {
  await (await locks.acquire(`warm:${Math.random()}`, { ttl: 2000 })).release()
}

for (const fast of [true, false]) {
  describe(fast ? 'fast path' : 'tokio path (LOCKDOG_FAST_PATH=0)', () => {
    test('a node killed and restarted ~1 s later while acquire waits: the acquire gets the lock', async () => {
      const s = await server()
      const locks = client(fast, { url: s.url, connectTimeout: 300, commandTimeout: 300 })
      await warm(locks)
      await s.kill()
      const t0 = performance.now()
      const pending = locks.acquire('outage:restart', { ttl: 5000, waitTimeout: 6000 })
      const settled = pending.then(() => 'resolved', (e) => e)
      await sleep(1000)
      // Still waiting while the node is down: neither resolved nor rejected.
      assert.equal(await Promise.race([settled, sleep(0).then(() => 'pending')]), 'pending')
      await s.start()
      const lock = await pending
      const took = performance.now() - t0
      assert.equal(lock.held, true)
      assert.ok(lock.attempts > 1, `attempts: ${lock.attempts}`)
      assert.ok(took < 6000, `took ${took} ms`)
      const probe = inspector(s)
      try {
        assert.equal(await probe.get('outage:restart'), lock.token)
        assert.equal(await lock.release(), true)
      } finally {
        probe.disconnect()
      }
    })

    test('a node restarted while a holder renews: a waiter gets the lock once the server is back', async () => {
      const s = await server()
      const holder = client(fast, { url: s.url, connectTimeout: 300, commandTimeout: 300 })
      const locks = client(fast, { url: s.url, connectTimeout: 300, commandTimeout: 300 })
      await warm(locks)
      const held = await holder.acquire('outage:held', { ttl: 3000 })
      const pending = locks.acquire('outage:held', { ttl: 3000, waitTimeout: 6000 })
      await sleep(200)
      await s.kill()
      await sleep(1000)
      await s.start() // empty: the holder's key is gone, the waiter takes it
      const lock = await pending
      assert.equal(lock.held, true)
      await waitFor(() => held.status === 'lost', { what: 'the holder told of its loss', timeout: 5000 })
      assert.equal(await lock.release(), true)
    })

    test('tryAcquire and retryCount: 0 during the outage fail at once', async () => {
      const s = await server()
      const locks = client(fast, { url: s.url, connectTimeout: 300, commandTimeout: 300 })
      await warm(locks)
      await s.kill()
      try {
        for (const attempt of [
          () => locks.tryAcquire('outage:try'),
          () => locks.acquire('outage:try', { retryCount: 0 }),
          () => locks.acquire('outage:try', { waitTimeout: 0 }),
        ]) {
          const t0 = performance.now()
          const err = await attempt().then(() => assert.fail('acquired while the node is down'), (e) => e)
          const took = performance.now() - t0
          assert.equal(err.code, 'ERR_LOCK_CONNECTION', err.message)
          assert.equal(err.attempts, 1)
          // One attempt: bounded by connectTimeout (300) + commandTimeout (300), not by waitTimeout.
          assert.ok(took < 300 + 300 + 500, `failed after ${took} ms`)
        }
      } finally {
        await s.start()
      }
    })

    test('a waitTimeout shorter than the outage: ERR_LOCK_CONNECTION with the last cause, within the budget', async () => {
      const s = await server()
      const locks = client(fast, { url: s.url, connectTimeout: 300, commandTimeout: 300 })
      await warm(locks)
      await s.kill()
      try {
        const budget = 800
        const t0 = performance.now()
        const err = await locks.acquire('outage:budget', { waitTimeout: budget, retryDelay: 50, retryJitter: 50 })
          .then(() => assert.fail('acquired while the node is down'), (e) => e)
        const took = performance.now() - t0
        assert.equal(err.code, 'ERR_LOCK_CONNECTION', err.message)
        assert.match(err.message, new RegExp(`waitTimeout of ${budget} ms passed`))
        assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${s.port}`))
        assert.ok(err.attempts > 1, `attempts: ${err.attempts}`)
        assert.equal(err.nodes.length, 1)
        assert.equal(err.nodes[0].answer, 'unreachable')
        assert.ok(took >= budget - 50, `gave up early, after ${took} ms`)
        // Slack: one pause (retryDelay + jitter) and scheduling; never another connect.
        assert.ok(took <= budget + 100 + 300, `gave up after ${took} ms, budget ${budget}`)
      } finally {
        await s.start()
      }
    })

    test('retryCount bounds the retries through an outage; an abort ends the wait', async () => {
      const s = await server()
      const locks = client(fast, { url: s.url, connectTimeout: 300, commandTimeout: 300 })
      await warm(locks)
      await s.kill()
      try {
        const err = await locks.acquire('outage:count', { retryCount: 3, retryDelay: 20, retryJitter: 0, waitTimeout: 10_000 })
          .then(() => assert.fail('acquired while the node is down'), (e) => e)
        assert.equal(err.code, 'ERR_LOCK_CONNECTION', err.message)
        assert.equal(err.attempts, 4)
        const ac = new AbortController()
        setTimeout(() => ac.abort(), 300)
        const t0 = performance.now()
        await assert.rejects(locks.acquire('outage:abort', { waitTimeout: 10_000, signal: ac.signal }), { code: 'ERR_LOCK_ABORTED' })
        assert.ok(performance.now() - t0 < 300 + 500)
      } finally {
        await s.start()
      }
    })

    test('an outage is one \'error\' per distinct fault, then \'reconnected\' once the node answers; health() tells', async () => {
      const s = await server()
      const locks = client(fast, { url: s.url, connectTimeout: 300, commandTimeout: 300 })
      const errors = []
      const back = []
      locks.on('error', (e) => errors.push(e))
      locks.on('reconnected', (info) => back.push({ ...info, errorsBefore: errors.length }))
      await warm(locks)
      const held = await Promise.all([1, 2, 3].map((i) => locks.acquire(`outage:signals:${i}`, { ttl: 1500 })))
      assert.deepEqual(locks.health().map((h) => [h.node, h.up, h.error]), [[locks.nodes[0], true, null]])
      await s.kill()
      try {
        // A waiting acquire retries every ~50 ms through the outage: each attempt is a fault.
        const err = await locks.acquire('outage:signals:wait', { waitTimeout: 1500, retryDelay: 50, retryJitter: 0 })
          .then(() => assert.fail('acquired while the node is down'), (e) => e)
        assert.equal(err.code, 'ERR_LOCK_CONNECTION')
        const [down] = locks.health()
        assert.equal(down.up, false)
        assert.equal(typeof down.error, 'string')
        assert.ok(down.faults >= err.attempts, `faults ${down.faults}, attempts ${err.attempts}`)
        assert.ok(down.since <= Date.now() - 1000, 'down since before the wait')
        assert.deepEqual(back, [], 'not reconnected while down')
      } finally {
        await s.start()
      }
      await waitFor(() => back.length > 0, { what: "'reconnected'", timeout: 5000 })
      const faults = locks.stats().errors
      assert.equal(back.length, 1)
      assert.equal(back[0].node, locks.nodes[0])
      assert.ok(back[0].downMs >= 1000, `down ${back[0].downMs} ms`)
      assert.ok(back[0].faults >= 20, `faults ${back[0].faults}`)
      // Coalesced: the same fault is emitted once (its repeats counted), a new one at once.
      const texts = errors.slice(0, back[0].errorsBefore).map((e) => e.message)
      assert.equal(new Set(texts).size, texts.length, `an identical fault emitted twice: ${texts.join(' | ')}`)
      assert.ok(texts.length <= 4 && faults >= 20, `${texts.length} 'error' events for ${faults} faults`)
      assert.ok(errors.every((e) => e.code === 'ERR_LOCK_CONNECTION' && e.repeated === 0))
      const [up] = locks.health()
      assert.equal(up.up, true)
      assert.equal(up.error, null)
      assert.ok(up.since >= Date.now() - 5000)
      // Held locks outlived the outage or were told of their loss; nothing hangs.
      await Promise.all(held.map((l) => l.release().catch(() => false)))
    })

    test('withLock, a semaphore, a read-write lock and a fair lock wait out a restart too', async () => {
      const s = await server()
      const locks = client(fast, { url: s.url, connectTimeout: 300, commandTimeout: 300 })
      await warm(locks)
      await s.kill()
      const opts = { ttl: 5000, waitTimeout: 6000 }
      const sem = locks.semaphore('outage:sem', { limit: 2 })
      const rw = locks.readWriteLock('outage:rw')
      const results = Promise.all([
        locks.withLock('outage:with', async () => 'ran', opts),
        sem.acquire(opts).then(async (lease) => { await lease.release(); return 'sem' }),
        rw.writeLock(opts).then(async (w) => { await w.release(); return 'rw' }),
        locks.acquire('outage:fair', { ...opts, fair: true }).then(async (l) => { await l.release(); return 'fair' }),
      ])
      await sleep(1000)
      await s.start()
      assert.deepEqual(await results, ['ran', 'sem', 'rw', 'fair'])
    })
  })
}

test('Redlock: a node down counts as a failed vote; a majority back within the budget gets the lock', async () => {
  const nodes = await Promise.all([0, 1, 2].map(() => server()))
  const locks = client(true, { nodes: nodes.map((n) => n.url), connectTimeout: 300, commandTimeout: 300 })
  await warm(locks)
  await nodes[1].kill()
  await nodes[2].kill()
  const pending = locks.acquire('outage:rl', { ttl: 5000, waitTimeout: 6000 })
  await sleep(1000)
  await nodes[1].start()
  const lock = await pending
  assert.equal(lock.held, true)
  const probes = nodes.slice(0, 2).map((n) => inspector(n))
  try {
    for (const p of probes) assert.equal(await p.get('outage:rl'), lock.token)
    assert.equal(await lock.release(), true)
  } finally {
    probes.forEach((p) => p.disconnect())
    await nodes[2].start()
  }
  // Past the budget: ERR_LOCK_QUORUM, naming every node's answer.
  await nodes[1].kill()
  await nodes[2].kill()
  try {
    const t0 = performance.now()
    const err = await locks.acquire('outage:rl2', { ttl: 5000, waitTimeout: 700 }).then(() => assert.fail('acquired'), (e) => e)
    const took = performance.now() - t0
    assert.equal(err.code, 'ERR_LOCK_QUORUM', err.message)
    assert.equal(err.nodes.length, 3)
    assert.equal(err.nodes[0].answer, 'ok')
    assert.ok(took <= 700 + 200 + 300, `gave up after ${took} ms`)
  } finally {
    await Promise.all([nodes[1].start(), nodes[2].start()])
  }
})
