'use strict'
// Run with --expose-gc: a lock that becomes unreachable must stop being renewed.
const { LockClient } = require('../..')

const [url, key] = process.argv.slice(2)
;(async () => {
  const locks = new LockClient({ url })
  await locks.acquire(key, { ttl: 300 }) // dropped at once
  for (let i = 0; i < 5; i++) {
    await new Promise((r) => setTimeout(r, 20))
    global.gc()
  }
  const before = locks.stats()
  await new Promise((r) => setTimeout(r, 900))
  const after = locks.stats()
  console.log(JSON.stringify({ before, after }))
  await locks.close()
})().catch((e) => {
  console.error(e)
  process.exit(1)
})
