'use strict'
// Waits in a fair line in its own process: `kind` is lock, sem (limit 1) or
// read/write (a read-write lock). Reports when it holds, holds `hold` ms,
// releases and reports that (or, with hold -1, holds until killed).
const { LockClient } = require('../..')

const [url, kind, key, hold] = process.argv.slice(2)
;(async () => {
  const locks = new LockClient({ url, fair: true, retryDelay: 100, retryJitter: 10 })
  const opts = { waitTimeout: 20000 }
  let lock
  if (kind === 'lock') lock = await locks.acquire(key, opts)
  else if (kind === 'sem') lock = await locks.semaphore(key, { limit: 1 }).acquire(opts)
  else if (kind === 'read') lock = await locks.readWriteLock(key).readLock(opts)
  else lock = await locks.readWriteLock(key).writeLock(opts)
  console.log(JSON.stringify({ acquired: true, at: Date.now(), token: lock.token }))
  if (Number(hold) < 0) return setInterval(() => {}, 1000)
  await new Promise((r) => setTimeout(r, Number(hold)))
  await lock.release()
  console.log(JSON.stringify({ released: true, at: Date.now() }))
  await locks.close()
})().catch((e) => {
  console.error(e)
  process.exit(1)
})
