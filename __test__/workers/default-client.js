'use strict'
const { withLock } = require('lockdog')
const Redis = require('ioredis')

;(async () => {
  const url = new URL(process.env.REDIS_URL)
  const redis = new Redis({ host: url.hostname, port: Number(url.port) })
  const value = await withLock('default:key', async (signal, lock) => {
    const held = (await redis.get('default:key')) === lock.token && !signal.aborted
    return { value: 42, held }
  })
  console.log(JSON.stringify(value))
  redis.disconnect()
})().catch((e) => {
  console.error(e)
  process.exit(1)
})
