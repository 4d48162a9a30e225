'use strict'
// One payment worker of the demo: races for the order's lock, then runs a job
// that outlasts the lock's TTL while the native watchdog keeps the lock alive.

const { LockClient } = require('..')

const [url, name, ttl, jobMs] = process.argv.slice(2)
const say = (event, extra = {}) => console.log(JSON.stringify({ event, name, t: performance.timeOrigin + performance.now(), ...extra }))

;(async () => {
  const locks = new LockClient({ url, ttl: Number(ttl) })
  say('waiting')
  await locks.withLock('order:1001:pay', async (signal, lock) => {
    say('acquired', { token: lock.token, attempts: lock.attempts, renewed: locks.stats().renewed })
    const end = Date.now() + Number(jobMs)
    while (Date.now() < end) {
      // 300 ms does not divide the 500 ms renewal period, so samples fall at
      // different points of it: validity is seen falling, then back up.
      await new Promise((r) => setTimeout(r, 300))
      if (signal.aborted) throw signal.reason
      say('working', { remaining: Math.round(lock.remaining), renewed: locks.stats().renewed })
    }
    say('releasing')
  }, { waitTimeout: 60_000, retryDelay: 100 })
  say('released', { renewed: locks.stats().renewed })
  await locks.close()
})().catch((e) => {
  say('failed', { code: e.code, message: e.message })
  process.exitCode = 1
})
