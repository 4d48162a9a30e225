'use strict'

// The hand-written ioredis lock from the article, written out faithfully so the
// benchmark compares lockdog with what people actually ship:
//   acquire: SET key token NX PX ttl
//   release / renew: Lua scripts registered with ioredis `defineCommand`
//   watchdog: setInterval(ttl / 3) running the renew script
// `acquire()` makes one attempt and resolves a boolean (the article's shape).

const crypto = require('node:crypto')

const RELEASE_LUA = `
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("del", KEYS[1])
else
  return 0
end`

const RENEW_LUA = `
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("pexpire", KEYS[1], ARGV[2])
else
  return 0
end`

class DistributedLock {
  constructor(redis, key, ttl = 30000) {
    this.redis = redis
    this.key = key
    this.ttl = ttl
    this.token = crypto.randomUUID()
    this.timer = null
    if (!redis.releaseLock) {
      redis.defineCommand('releaseLock', { numberOfKeys: 1, lua: RELEASE_LUA })
      redis.defineCommand('renewLock', { numberOfKeys: 1, lua: RENEW_LUA })
    }
  }

  async acquire() {
    const ok = await this.redis.set(this.key, this.token, 'PX', this.ttl, 'NX')
    if (ok !== 'OK') return false
    this.startWatchdog()
    return true
  }

  startWatchdog() {
    this.timer = setInterval(async () => {
      try {
        const renewed = await this.redis.renewLock(this.key, this.token, this.ttl)
        if (renewed === 0) {
          clearInterval(this.timer)
          this.timer = null
        }
      } catch (err) {
        // the article logs and keeps trying on the next tick
      }
    }, this.ttl / 3)
  }

  async release() {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    return this.redis.releaseLock(this.key, this.token)
  }
}

async function withLock(redis, key, fn, ttl = 30000) {
  const lock = new DistributedLock(redis, key, ttl)
  if (!(await lock.acquire())) throw new Error(`lock ${key} is held`)
  try {
    return await fn()
  } finally {
    await lock.release()
  }
}

module.exports = { DistributedLock, withLock, RELEASE_LUA, RENEW_LUA }
