'use strict'

// One process of bench/fair/run.js: `waiters` loops taking the same key
// until `seconds` pass; prints each loop's completions and waits as JSON.

const { LockClient } = require('../..')

const cfg = JSON.parse(process.argv[2])
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

;(async () => {
  const locks = new LockClient({ url: cfg.url, ttl: 5000, waitTimeout: 30000, fair: cfg.fair, ...(cfg.retryDelay !== undefined ? { retryDelay: cfg.retryDelay } : {}) })
  const until = performance.now() + cfg.seconds * 1000
  const sem = locks.semaphore('bench:fair', { limit: cfg.limit ?? 2 })
  const rw = locks.readWriteLock('bench:fair')
  const section = (i) => {
    if (cfg.kind === 'semaphore') return (fn) => sem.withPermit(fn)
    if (cfg.kind === 'rwlock') return i % 2 === 0 ? (fn) => rw.withWriteLock(fn) : (fn) => rw.withReadLock(fn)
    return (fn) => locks.withLock('bench:fair', fn)
  }
  const waiters = await Promise.all(Array.from({ length: cfg.waiters }, async (_, i) => {
    const w = { count: 0, waits: [], at: [], asked: [] }
    const under = section(i)
    while (performance.now() < until) {
      const asked = performance.now()
      await under(async () => {
        w.waits.push(performance.now() - asked)
        w.at.push(performance.timeOrigin + performance.now())
        w.asked.push(performance.timeOrigin + asked)
        await sleep(cfg.cs)
      })
      w.count++
    }
    return w
  }))
  const stats = locks.stats()
  await locks.close()
  process.stdout.write(JSON.stringify({ id: cfg.id, waiters, stats }))
})().catch((e) => {
  console.error(e)
  process.exit(1)
})
