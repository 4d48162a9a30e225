'use strict'
// Tries to take a lock every few ms for a while; reports any success.
const { LockClient } = require('../..')

const [url, key, durationMs] = process.argv.slice(2)
;(async () => {
  const locks = new LockClient({ url })
  const end = Date.now() + Number(durationMs)
  let tries = 0
  let won = 0
  console.log(JSON.stringify({ started: true }))
  while (Date.now() < end) {
    tries++
    const lock = await locks.tryAcquire(key, { ttl: 1000 })
    if (lock) {
      won++
      await lock.release()
    }
    await new Promise((r) => setTimeout(r, 10))
  }
  await locks.close()
  console.log(JSON.stringify({ tries, won }))
})().catch((e) => {
  console.error(e)
  process.exit(1)
})
