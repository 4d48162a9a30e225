'use strict'
// Increments a Redis counter N times with a read-modify-write inside withLock.
const { LockClient } = require('../..')
const Redis = require('ioredis')

const [url, key, rounds] = process.argv.slice(2)
;(async () => {
  // One URL, or several comma-separated for Redlock; the counter lives on the first.
  const urls = url.split(',')
  const locks = new LockClient({ nodes: urls, ttl: 2000 })
  const port = Number(new URL(urls[0]).port)
  const redis = new Redis({ host: '127.0.0.1', port })
  for (let i = 0; i < Number(rounds); i++) {
    await locks.withLock(key, async () => {
      const v = Number((await redis.get(`${key}:counter`)) || 0)
      await new Promise((r) => setImmediate(r))
      await redis.set(`${key}:counter`, v + 1)
    }, { waitTimeout: 30000, retryDelay: 5, retryJitter: 5 })
  }
  await locks.close()
  redis.disconnect()
  console.log(JSON.stringify({ done: Number(rounds) }))
})().catch((e) => {
  console.error(e)
  process.exit(1)
})
