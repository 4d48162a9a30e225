'use strict'

// lock.handOver(): the holder lets go without releasing (renewals stop, the
// keys keep their lease) and another client continues the lock with adopt();
// nothing the old Lock does afterwards deletes the keys.

const { test, after } = require('node:test')
const assert = require('node:assert/strict')
const { serverAndClient, waitFor } = require('./helpers')

// The watchdog never keeps Node alive; tests that wait for a renewal or a lapse do.
const keepAlive = setInterval(() => {}, 1000)

let redis
let client
serverAndClient({}, (s) => ({ redis, client } = s))
after(() => clearInterval(keepAlive))

test('handOver stops renewing, keeps the key and returns what the adopter needs', async () => {
  const a = client()
  const b = client()
  const lock = await a.acquire('ho:basic', { ttl: 1000 })
  const info = lock.handOver()
  assert.deepEqual(Object.keys(info).sort(), ['fence', 'key', 'keys', 'remaining', 'token'])
  assert.equal(info.key, 'ho:basic')
  assert.deepEqual(info.keys, ['ho:basic'])
  assert.equal(info.token, lock.token)
  assert.ok(info.remaining > 0 && info.remaining <= 1000, `remaining ${info.remaining}`)
  assert.equal(lock.status, 'handed-over')
  assert.equal(await redis.get('ho:basic'), lock.token, 'the key stays')
  const adopted = await b.adopt(info.keys, info.token, { ttl: 5000 })
  assert.throws(() => lock.handOver(), (e) => e.code === 'ERR_LOCK_LOST' && /cannot be handed over: it was handed over/.test(e.message))
  assert.equal(await lock.release(), false, 'a handed-over lock does not release')
  assert.equal(lock.status, 'handed-over', 'nor does a release make it released')
  assert.equal(await redis.get('ho:basic'), info.token)
  assert.ok(await redis.pttl('ho:basic') > 1000, 'the adopter\'s lease')
  assert.equal(lock.signal.aborted, false, 'handing over is not a loss')
  await a.close()
  assert.equal(await redis.get('ho:basic'), info.token, 'closing the old client leaves the key alone')
  assert.equal(await adopted.release(), true)
})

test('a handed-over lock nobody adopts is not renewed: its key expires within its ttl', async () => {
  const a = client()
  const lock = await a.acquire('ho:lapse', { ttl: 600 })
  const started = Date.now()
  lock.handOver()
  await waitFor(async () => (await redis.exists('ho:lapse')) === 0, { timeout: 5000, what: 'the key to expire' })
  assert.ok(Date.now() - started < 3000, 'a renewal kept the key alive')
})

test('handOver inside withLock: withLock resolves, the key is left for the adopter', async () => {
  const a = client()
  let info
  const result = await a.withLock('ho:withlock', async (signal, lock) => {
    info = lock.handOver()
    return 'handed'
  }, { ttl: 5000 })
  assert.equal(result, 'handed')
  assert.equal(await redis.get('ho:withlock'), info.token)
  await redis.del('ho:withlock')
})

test('handOver of a lock no longer held throws ERR_LOCK_LOST', async () => {
  const a = client()
  const lock = await a.acquire('ho:gone')
  await lock.release()
  assert.throws(() => lock.handOver(), (e) => e.code === 'ERR_LOCK_LOST' && e.key === 'ho:gone' && /it was released/.test(e.message))
  const closed = await a.acquire('ho:closed')
  await a.close()
  assert.throws(() => closed.handOver(), (e) => e.code === 'ERR_LOCK_LOST' && /its client was closed/.test(e.message))
})

for (const handOver of [true, false]) {
  test(`autoRenew: false, ${handOver ? 'handed over' : 'adopted'} and then lapsed locally: the adopter's key is not deleted`, async () => {
    const a = client()
    const b = client()
    const lock = await a.acquire(`ho:norenew:${handOver}`, { ttl: 500, autoRenew: false })
    const info = handOver ? lock.handOver() : { token: lock.token, remaining: lock.remaining }
    const token = info.token
    const adopted = await b.adopt(`ho:norenew:${handOver}`, token, { ttl: 10000 })
    if (!handOver) await waitFor(() => lock.status === 'lost', { timeout: 5000, what: 'the old lock to lapse locally' })
    // Past the old lease's end: the old lock has nothing left to act on.
    else await new Promise((r) => setTimeout(r, info.remaining + 200))
    await a.settled()
    assert.equal(await redis.get(`ho:norenew:${handOver}`), token, 'the old lock deleted the adopter\'s key')
    assert.equal(adopted.held, true)
    assert.equal(await adopted.release(), true)
  })
}
