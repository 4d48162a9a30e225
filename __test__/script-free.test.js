'use strict'

// On a server that has them, the JS-loop driver gives a lock of one key back
// with `DELIFEQ key token` (Valkey 9.0) and extends it with
// `SET key token IFEQ token PX ttl` (Valkey 8.1), not with the scripts; the
// release's notice still goes out (PUBLISH), and a command refused (an ACL
// without it) goes again as the script, which that connection then keeps to.
// Everywhere else (an older server, the tokio driver, a lock of two keys, a
// semaphore) the scripts run. Counted with INFO commandstats on a server of
// the file's own, whichever server the run uses (`npm run test:valkey-9`).

const { test, before, after, describe } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis, inspector, lockClient, commandStats, commandsOf, scriptFreeCommands, waitFor } = require('./helpers')

let server
let probe
let has

before(async () => {
  server = await startRedis()
  probe = inspector(server)
  has = await scriptFreeCommands(probe)
})

after(async () => {
  probe.disconnect()
  await server.stop()
})

/** Calls per command that `step` made the server run. */
const counted = (step) => commandsOf(probe, step)

const scripts = (stats) => (stats.evalsha ?? 0) + (stats.eval ?? 0)

async function warm(locks) {
  await waitFor(async () => {
    await (await locks.acquire(`free:warm:${Math.random()}`, { ttl: 2000 })).release()
    return true
  }, { what: 'a warm client' })
  return locks
}

for (const fast of [true, false]) {
  describe(fast ? 'JS-loop driver' : 'tokio driver (LOCKDOG_FAST_PATH=0)', () => {
    const free = () => fast && has.delIfEq
    const freeExtend = () => fast && has.setIfEq

    test('a lock of one key: released and extended by the server\'s commands where it has them', async () => {
      const locks = await warm(lockClient(fast, { url: server.url }))
      const key = `free:one:${fast}`
      const lock = await locks.acquire(key, { ttl: 5000 })
      const extended = await counted(async () => await lock.extend(20_000))
      if (freeExtend()) assert.deepEqual(extended, { set: 1 }, 'SET … IFEQ … PX, no script')
      else assert.deepEqual({ scripts: scripts(extended), set: extended.set ?? 0 }, { scripts: 1, set: 0 }, 'the extend script')
      const pttl = await probe.pttl(key)
      assert.ok(pttl > 15_000 && pttl <= 20_000, `extended to 20 s: ${pttl}`)
      assert.equal(await probe.get(key), lock.token, 'the value is still the token')
      const released = await counted(async () => assert.equal(await lock.release(), true))
      if (free()) assert.deepEqual(released, { delifeq: 1, publish: 1 }, 'DELIFEQ and the notice, no script')
      else assert.deepEqual({ scripts: scripts(released), delifeq: released.delifeq ?? 0 }, { scripts: 1, delifeq: 0 })
      assert.equal(await probe.exists(key), 0)
      await locks.close()
    })

    test('a lock no longer held: the extend makes no key, the release deletes no one else\'s', async () => {
      const locks = await warm(lockClient(fast, { url: server.url }))
      const key = `free:lost:${fast}`
      const lock = await locks.acquire(key, { ttl: 5000, autoRenew: false })
      await probe.set(key, 'someone', 'PX', 8000)
      await assert.rejects(lock.extend(5000), (e) => e.code === 'ERR_LOCK_LOST' || e.code === 'ERR_NOT_HELD')
      assert.equal(await probe.get(key), 'someone')
      assert.ok(await probe.pttl(key) <= 8000)
      await probe.del(key)
      const again = await locks.acquire(key, { ttl: 5000, autoRenew: false })
      await probe.set(key, 'someone', 'PX', 8000)
      const released = await again.release().then((r) => r, (e) => e)
      assert.notEqual(released, true, 'not released: the key is someone else\'s')
      assert.equal(await probe.get(key), 'someone')
      await locks.close()
    })

    test('a waiter still hears the release (its notice is published)', async () => {
      const locks = await warm(lockClient(fast, { url: server.url }))
      const key = `free:notice:${fast}`
      const holder = await locks.acquire(key, { ttl: 30_000 })
      // Retries far apart: only the notice wakes the waiter in time.
      const waiting = locks.acquire(key, { ttl: 5000, waitTimeout: 20_000, retryDelay: 15_000, retryJitter: 0 })
      await waitFor(async () => (await probe.pubsub('NUMSUB', `__lockdog:released:${key}`))[1] >= 1, { what: 'the waiter subscribed' })
      const t0 = Date.now()
      assert.equal(await holder.release(), true)
      const next = await waiting
      assert.ok(Date.now() - t0 < 10_000, `woken by the notice, not its retry: ${Date.now() - t0} ms`)
      assert.equal(await probe.get(key), next.token)
      await next.release()
      await locks.close()
    })

    test('two keys and a semaphore keep the scripts', async () => {
      const locks = await warm(lockClient(fast, { url: server.url }))
      for (const [what, take] of [
        ['two keys', () => locks.acquire([`free:{a}:1:${fast}`, `free:{a}:2:${fast}`], { ttl: 5000 })],
        ['a semaphore', () => locks.semaphore(`free:sem:${fast}`, { limit: 2 }).acquire({ ttl: 5000 })],
      ]) {
        const lock = await take()
        const extended = await counted(async () => await lock.extend(8000))
        assert.equal(scripts(extended), 1, `${what}: the extend script`)
        const released = await counted(async () => assert.equal(await lock.release(), true))
        assert.equal(scripts(released), 1, `${what}: the release script`)
        assert.equal(released.delifeq ?? 0, 0, what)
      }
      await locks.close()
    })
  })
}

describe('a refused command goes again as the script', () => {
  test('an ACL user without DELIFEQ still releases, by the script, and keeps to it', async (t) => {
    if (!has.delIfEq) return t.skip('the server has no DELIFEQ (npm run test:valkey-9)')
    await probe.call('ACL', 'SETUSER', 'free-acl', 'on', '>free-pw', '~*', '&*', '+@all', '-delifeq')
    t.after(() => probe.call('ACL', 'DELUSER', 'free-acl'))
    const locks = lockClient(true, { url: `redis://free-acl:free-pw@127.0.0.1:${server.port}` })
    t.after(() => locks.close())
    const key = 'free:acl'
    for (const round of [1, 2]) {
      const lock = await locks.acquire(key, { ttl: 5000 })
      await probe.config('RESETSTAT')
      assert.equal(await lock.release(), true, `round ${round}: released`)
      const stats = await commandStats(probe)
      assert.equal(await probe.exists(key), 0)
      // The first is refused, then sent as the script; the next goes as the script at once.
      assert.equal(stats.delifeq?.calls ?? 0, 0, 'a refused command is not counted as called')
      const refused = Number(/^cmdstat_delifeq:.*rejected_calls=(\d+)/m.exec(await probe.info('commandstats'))?.[1] ?? 0)
      assert.equal(refused, round === 1 ? 1 : 0, `round ${round}: DELIFEQ refused ${refused} times`)
      assert.equal((stats.evalsha?.calls ?? 0) + (stats.eval?.calls ?? 0), 1, `round ${round}: the script`)
    }
  })
})
