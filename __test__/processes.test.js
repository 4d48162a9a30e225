'use strict'

const { test, after } = require('node:test')
const assert = require('node:assert/strict')
const { LockClient } = require('..')
const { serverAndClient, runWorker, waitFor } = require('./helpers')

let server
let redis

serverAndClient({}, (s) => ({ server, redis } = s))

test('mutual exclusion across processes: an exact counter', async () => {
  const workers = 4
  const rounds = 40
  const runs = Array.from({ length: workers }, () => runWorker('counter.js', [server.url, 'mx:proc', rounds]))
  const results = await Promise.all(runs.map((r) => r.exited))
  for (const r of results) assert.equal(r.code, 0, r.stderr)
  assert.equal(Number(await redis.get('mx:proc:counter')), workers * rounds)
  assert.equal(await redis.exists('mx:proc'), 0, 'no lock left behind')
})

test('mutual exclusion across async tasks in one process: an exact counter', async () => {
  const locks = new LockClient({ url: server.url, ttl: 2000 })
  const tasks = 16
  const rounds = 15
  let inside = 0
  let maxInside = 0
  await Promise.all(Array.from({ length: tasks }, async () => {
    for (let i = 0; i < rounds; i++) {
      await locks.withLock('mx:tasks', async () => {
        inside++
        maxInside = Math.max(maxInside, inside)
        const v = Number((await redis.get('mx:tasks:counter')) || 0)
        await new Promise((r) => setImmediate(r))
        await redis.set('mx:tasks:counter', v + 1)
        inside--
      }, { retryDelay: 2, retryJitter: 3, waitTimeout: 30000 })
    }
  }))
  assert.equal(maxInside, 1)
  assert.equal(Number(await redis.get('mx:tasks:counter')), tasks * rounds)
  await locks.close()
})

test('a holder killed with SIGKILL: another process acquires within ttl + retry delay', async () => {
  const ttl = 1000
  const holder = runWorker('holder.js', [server.url, 'proc:killed', ttl, 'hold'])
  await waitFor(() => holder.lines.some((l) => l.acquired), { what: 'holder to acquire' })
  const locks = new LockClient({ url: server.url })
  assert.equal(await locks.tryAcquire('proc:killed'), null, 'held while the holder lives')
  holder.child.kill('SIGKILL')
  const killedAt = performance.now()
  await holder.exited
  const lock = await locks.acquire('proc:killed', { retryDelay: 50, retryJitter: 0, waitTimeout: 5000 })
  const waited = performance.now() - killedAt
  // The dead holder's key lapses within ttl of the kill; a waiter that retries every 50 ms
  // takes it within one more delay and attempt. The slack is for a loaded machine's
  // scheduling, far below the 5 s waitTimeout a waiter that stopped retrying would reach.
  assert.ok(waited <= ttl + 50 + 500, `took over after ${waited.toFixed(0)} ms`)
  await lock.release()
  await locks.close()
})

test('a process holding a lock exits by itself; its key expires within the TTL', async () => {
  const ttl = 1500
  const t0 = performance.now()
  const holder = runWorker('holder.js', [server.url, 'proc:exit', ttl, 'exit'])
  const result = await holder.exited
  assert.equal(result.code, 0, result.stderr)
  assert.ok(result.lines.some((l) => l.acquired))
  assert.ok(performance.now() - t0 < 5000, 'the watchdog did not keep the process alive')
  await waitFor(async () => (await redis.exists('proc:exit')) === 0, { timeout: ttl + 500, what: 'key expiry' })
})

test('a process that used a client ends by itself, whether it closed the client or not', async () => {
  for (const mode of ['close', 'open']) {
    const run = runWorker('exits.js', [server.url, mode])
    // Ending is the assertion: a client must never hold the process open (nor
    // deadlock the environment's teardown while its finalizers run).
    const timer = setTimeout(() => run.child.kill('SIGKILL'), 20000)
    const r = await run.exited
    clearTimeout(timer)
    assert.equal(r.signal ?? null, null, `the ${mode} process did not end by itself within 20 s`)
    assert.equal(r.code, 0, r.stderr)
    assert.deepEqual(run.lines.at(-1), { done: mode })
  }
})
