'use strict'

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { LockClient } = require('..')
const { serverAndClient, loopLag, startRedis, runWorker, waitFor, aborted, sleep } = require('./helpers')

let server
let redis
let locks

serverAndClient({ client: {} }, (s) => ({ server, redis, locks } = s))

test('the watchdog keeps a lock alive far past its TTL', async () => {
  const ttl = 300
  const lock = await locks.acquire('wd:long', { ttl })
  const end = performance.now() + ttl * 6
  while (performance.now() < end) {
    assert.equal(await redis.get('wd:long'), lock.token)
    await sleep(50)
  }
  assert.equal(lock.held, true)
  assert.ok(lock.remaining > 0)
  assert.ok(locks.stats().renewed >= 10, `renewed ${locks.stats().renewed}`)
  assert.equal(await lock.release(), true)
})

test('a blocked JS event loop (3 x TTL) does not let the lock expire; no one else gets it', async () => {
  const ttl = 400
  const lock = await locks.acquire('wd:blocked', { ttl })
  const prober = runWorker('prober.js', [server.url, 'wd:blocked', ttl * 3 + 600])
  await waitFor(() => prober.lines.some((l) => l.started), { what: 'prober start' })
  const renewedBefore = locks.stats().renewed
  const end = Date.now() + ttl * 3
  while (Date.now() < end) {
    // busy: the JS thread cannot run a single timer or callback
  }
  assert.ok(locks.stats().renewed - renewedBefore >= 6, 'renewals ran while JS was blocked')
  assert.equal(lock.held, true)
  assert.equal(await redis.get('wd:blocked'), lock.token)
  const result = await prober.exited
  assert.equal(result.code, 0, result.stderr)
  const summary = result.lines.find((l) => 'won' in l)
  assert.ok(summary.tries > 5, `prober tried ${summary.tries} times`)
  assert.equal(summary.won, 0, 'nobody else may take a lock that is still held')
  await lock.release()
})

test('key deleted under the holder: signal aborts within one renew interval, with ERR_LOCK_LOST', async () => {
  const ttl = 600
  const lost = []
  locks.once('lost', (err) => lost.push(err))
  const onLost = []
  const lock = await locks.acquire('wd:deleted', { ttl, onLost: (err) => onLost.push(err) })
  const signal = lock.signal
  await sleep(50)
  await redis.del('wd:deleted')
  const t0 = performance.now()
  const at = await aborted(signal)
  const latency = at - t0
  assert.ok(latency <= ttl / 3 + 150, `loss signalled after ${latency.toFixed(1)} ms`)
  assert.equal(signal.reason.code, 'ERR_LOCK_LOST')
  assert.equal(signal.reason.name, 'LockError')
  assert.equal(lock.status, 'lost')
  assert.equal(lock.held, false)
  assert.equal(onLost.length, 1)
  assert.equal(onLost[0].code, 'ERR_LOCK_LOST')
  await waitFor(() => lost.length === 1, { what: "client 'lost' event" })
  assert.equal(await lock.release(), false)
  assert.equal(await redis.exists('wd:deleted'), 0, 'nothing is recreated')
})

test('key overwritten by another token: loss signalled, the other owner untouched', async () => {
  const ttl = 600
  const lock = await locks.acquire('wd:stolen', { ttl })
  await redis.set('wd:stolen', 'intruder', 'PX', 10000)
  const t0 = performance.now()
  await aborted(lock.signal)
  assert.ok(performance.now() - t0 <= ttl / 3 + 150)
  assert.equal(lock.signal.reason.code, 'ERR_LOCK_LOST')
  assert.equal(await redis.get('wd:stolen'), 'intruder')
  assert.ok((await redis.pttl('wd:stolen')) > 9000, 'the intruder TTL was not touched')
  await redis.del('wd:stolen')
})

test('withLock rejects ERR_LOCK_LOST carrying fn\'s result when the lock was lost meanwhile', async () => {
  await assert.rejects(
    locks.withLock('wd:with', async (signal) => {
      await redis.del('wd:with')
      await aborted(signal)
      return 'late result'
    }, { ttl: 300 }),
    (e) => e.code === 'ERR_LOCK_LOST' && e.cause === 'late result',
  )
  const boom = new Error('inner')
  await assert.rejects(
    locks.withLock('wd:with', async (signal) => {
      await redis.set('wd:with', 'other', 'PX', 5000)
      await aborted(signal)
      throw boom
    }, { ttl: 300 }),
    (e) => e.code === 'ERR_LOCK_LOST' && e.cause === boom,
  )
  assert.equal(await redis.get('wd:with'), 'other')
  await redis.del('wd:with')
})

test('Redis stopped: the signal aborts at the local deadline, not before', async () => {
  const own = await startRedis()
  const c = new LockClient({ url: own.url, commandTimeout: 100, connectTimeout: 100 })
  const ttl = 800
  const lock = await c.acquire('wd:down', { ttl })
  const deadline = performance.now() + lock.remaining
  await own.kill()
  const at = await aborted(lock.signal)
  assert.ok(at >= deadline - 5, `aborted ${(deadline - at).toFixed(1)} ms before the deadline`)
  assert.ok(at <= deadline + 200, `aborted ${(at - deadline).toFixed(1)} ms after the deadline`)
  assert.equal(lock.signal.reason.code, 'ERR_LOCK_LOST')
  await c.close()
  await own.stop()
})

test('maxHold caps how long the watchdog keeps a lock alive', async () => {
  const lag = loopLag()
  const ttl = 300
  const maxHold = 700
  const tA = performance.now()
  const lock = await locks.acquire('wd:maxhold', { ttl, maxHold })
  const t0 = performance.now()
  const end = await aborted(lock.signal)
  lag.stop()
  // maxHold counts from the attempt (between tA and t0), less one drift allowance
  // (ttl * 1% + 2 ms); the loss may be seen on the last renewal's reply, up to one renew
  // interval (ttl / 3) later, and reaches JS as late as this loop runs.
  const drift = ttl * 0.01 + 2
  const slack = ttl / 3 + lag.max()
  assert.ok(end - tA >= maxHold - drift, `held for ${(end - tA).toFixed(0)} ms from the call`)
  assert.ok(end - t0 <= maxHold + slack, `held for ${(end - t0).toFixed(0)} ms (allowed ${slack.toFixed(0)} ms past maxHold)`)
  assert.match(lock.signal.reason.message, /maxHold/)
  await waitFor(async () => (await redis.exists('wd:maxhold')) === 0, { what: 'key expiry', timeout: 2000 })
})

test('a garbage-collected lock is never renewed again', async () => {
  const gc = runWorker('gc.js', [server.url, 'wd:gc'], { nodeArgs: ['--expose-gc'] })
  const result = await gc.exited
  assert.equal(result.code, 0, result.stderr)
  const { before, after } = result.lines.find((l) => l.before)
  assert.equal(before.acquired, 1)
  assert.equal(after.held, 0, 'the collected lock no longer counts as held')
  assert.equal(after.renewed, before.renewed, 'no renewal after collection')
  assert.equal(await redis.exists('wd:gc'), 0, 'its key expired by TTL')
})

test('after one lock is lost, the client keeps renewing and watching the next ones', async () => {
  const c = new LockClient({ url: server.url })
  const first = await c.acquire('wd:first', { ttl: 300, maxHold: 400 })
  await aborted(first.signal)
  const second = await c.acquire('wd:second', { ttl: 300 })
  const renewed = c.stats().renewed
  await waitFor(() => c.stats().renewed >= renewed + 3, { what: 'renewals of the second lock', timeout: 2000 })
  assert.equal(second.held, true)
  await redis.del('wd:second')
  await aborted(second.signal)
  assert.equal(second.signal.reason.code, 'ERR_LOCK_LOST')
  const third = await c.acquire('wd:third', { ttl: 300 })
  await sleep(700)
  assert.equal(third.held, true)
  assert.equal(await redis.get('wd:third'), third.token)
  await c.close()
})
