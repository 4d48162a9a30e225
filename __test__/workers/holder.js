'use strict'
// Acquires a lock, reports it, then either holds it forever (to be killed) or
// exits without releasing (to show the process is not kept alive).
const { LockClient } = require('../..')

const [url, key, ttl, mode] = process.argv.slice(2)
;(async () => {
  const locks = new LockClient({ url })
  const lock = await locks.acquire(key, { ttl: Number(ttl) })
  console.log(JSON.stringify({ acquired: true, token: lock.token }))
  if (mode === 'hold') setInterval(() => {}, 1000)
  // mode 'exit': nothing keeps the event loop alive; the process must end by itself.
})().catch((e) => {
  console.error(e)
  process.exit(1)
})
