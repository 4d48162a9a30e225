'use strict'

// Every contender behind one small interface, so the scenarios never special-case a library:
//   create({ urls, ttl, wait, renew }) -> { acquire(key) -> handle, release(handle), close() }
// `wait`: null (one attempt is enough: no contention), { retryDelay, retryJitter, waitTimeout }
//   (the same polling settings for every library that polls), or { defaults: true } (each
//   library waits as it does out of the box).
// `renew`: true in scenario 5: the handle must stay held under the library's own auto-renewal
//   (renewing every ttl/3 where the library lets us choose) until released.
// Without `renew`, each library is used through its plain acquire/release API with its defaults
// (lockdog and redis-semaphore renew by default, so they pay for a timer/watchdog per lock).

const crypto = require('node:crypto')
const path = require('node:path')

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

function ioredis() {
  return require('ioredis')
}

async function connect(urls) {
  const Redis = ioredis()
  const clients = urls.map((u) => new Redis(u, { maxRetriesPerRequest: 1 }))
  await Promise.all(clients.map((c) => c.ping()))
  return clients
}

function closeAll(clients) {
  return Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())))
}

/** Retries given as a count for libraries that take a count instead of a deadline. */
function retryCountFor(wait) {
  return Math.ceil(wait.waitTimeout / Math.max(1, wait.retryDelay))
}

const contenders = {}

contenders.lockdog = {
  label: 'lockdog',
  kind: 'lib',
  scenarios: [1, 2, 3, 4, 5, 6],
  async create({ urls, ttl, wait, renew, lockdogPath }) {
    const { LockClient } = require(lockdogPath)
    const opts = urls.length === 1 ? { url: urls[0], ttl } : { nodes: urls, ttl }
    const client = new LockClient(opts)
    const acqOpts = wait && !wait.defaults
      ? { retryDelay: wait.retryDelay, retryJitter: wait.retryJitter, waitTimeout: wait.waitTimeout }
      : {}
    if (renew) acqOpts.renewInterval = Math.floor(ttl / 3)
    // connect before measuring
    await (await client.acquire(`warm:${crypto.randomUUID()}`)).release()
    return {
      acquire: (key) => client.acquire(key, acqOpts),
      release: (lock) => lock.release(),
      close: () => client.close(),
      stats: () => client.stats(),
    }
  },
}

contenders.handwritten = {
  label: 'hand-written ioredis',
  kind: 'lib',
  scenarios: [1, 2, 3, 5, 6],
  async create({ urls, ttl, wait }) {
    if (urls.length !== 1) throw new Error('single node only')
    const { DistributedLock } = require('./handwritten')
    const [redis] = await connect(urls)
    // The article's lock has no wait of its own; at "defaults" callers poll with the
    // articles' redlock settings (200 ms + up to 100 ms jitter).
    if (wait && wait.defaults) wait = { retryDelay: 200, retryJitter: 100, waitTimeout: 10000 }
    return {
      async acquire(key) {
        const lock = new DistributedLock(redis, key, ttl)
        if (await lock.acquire()) return lock
        if (!wait) throw new Error(`${key} is held`)
        // The article's lock makes one attempt; callers that wait loop like this.
        const deadline = Date.now() + wait.waitTimeout
        while (Date.now() < deadline) {
          await sleep(wait.retryDelay + Math.random() * wait.retryJitter)
          if (await lock.acquire()) return lock
        }
        throw new Error(`timed out waiting for ${key}`)
      },
      release: (lock) => lock.release(),
      close: () => closeAll([redis]),
    }
  },
}

function redlockContender(label, load) {
  return {
    label,
    kind: 'lib',
    scenarios: [1, 2, 3, 4, 5, 6],
    async create({ urls, ttl, wait, renew }) {
      const Redlock = load()
      const clients = await connect(urls)
      const settings = { driftFactor: 0.01, retryCount: 10, retryDelay: 200, retryJitter: 100 }
      if (wait && !wait.defaults) Object.assign(settings, { retryCount: retryCountFor(wait), retryDelay: wait.retryDelay, retryJitter: wait.retryJitter })
      // `using` extends when less than the threshold is left: ttl - ttl/3 renews every ttl/3
      if (renew) settings.automaticExtensionThreshold = Math.floor((ttl * 2) / 3)
      const redlock = new Redlock(clients, settings)
      redlock.on('error', () => {})
      if (renew) {
        return {
          acquire(key) {
            return new Promise((resolve, reject) => {
              let done
              const finished = redlock
                .using([key], ttl, async () => {
                  await new Promise((r) => {
                    done = r
                    resolve({ finish: () => { done(); return finished } })
                  })
                })
                .catch(reject)
            })
          },
          release: (h) => h.finish(),
          close: () => closeAll(clients),
        }
      }
      return {
        acquire: (key) => redlock.acquire([key], ttl),
        release: (lock) => lock.release(),
        close: () => closeAll(clients),
      }
    },
  }
}

contenders.redlock = redlockContender('redlock 5.0.0-beta.2', () => require('redlock').default)
contenders.sesame = redlockContender('@sesamecare-oss/redlock', () => require('@sesamecare-oss/redlock').Redlock)

function semaphoreContender(label, multi) {
  return {
    label,
    kind: 'lib',
    scenarios: multi ? [4] : [1, 2, 3, 5, 6],
    async create({ urls, ttl, wait, renew }) {
      const { Mutex, RedlockMutex } = require('redis-semaphore')
      const clients = await connect(urls)
      const opts = { lockTimeout: ttl }
      if (wait && !wait.defaults) Object.assign(opts, { acquireTimeout: wait.waitTimeout, retryInterval: wait.retryDelay })
      if (renew) opts.refreshInterval = Math.floor(ttl / 3)
      const make = (key) => (multi ? new RedlockMutex(clients, key, opts) : new Mutex(clients[0], key, opts))
      return {
        async acquire(key) {
          const m = make(key)
          await m.acquire()
          return m
        },
        release: (m) => m.release(),
        close: () => closeAll(clients),
      }
    },
  }
}

contenders.semaphore = semaphoreContender('redis-semaphore Mutex', false)
contenders.semaphoreRedlock = semaphoreContender('redis-semaphore RedlockMutex', true)

contenders.universal = {
  label: 'redlock-universal',
  kind: 'lib',
  scenarios: [1, 2, 3, 4, 5, 6],
  async create({ urls, ttl, wait, renew }) {
    const { createLock, createRedlock, IoredisAdapter } = require('redlock-universal')
    const clients = await connect(urls)
    const adapters = clients.map((c) => new IoredisAdapter(c))
    const base = { ttl }
    if (wait && !wait.defaults) Object.assign(base, { retryAttempts: retryCountFor(wait), retryDelay: wait.retryDelay })
    const locks = new Map()
    const lockFor = (key) => {
      let l = locks.get(key)
      if (!l) {
        l = urls.length === 1 ? createLock({ adapter: adapters[0], key, ...base }) : createRedlock({ adapters, key, ...base })
        locks.set(key, l)
      }
      return l
    }
    if (renew) {
      return {
        acquire(key) {
          return new Promise((resolve, reject) => {
            let done
            const finished = lockFor(key)
              .using(async () => {
                await new Promise((r) => {
                  done = r
                  resolve({ finish: () => { done(); return finished } })
                })
              })
              .catch(reject)
          })
        },
        release: (h) => h.finish(),
        close: () => closeAll(clients),
      }
    }
    return {
      async acquire(key) {
        const lock = lockFor(key)
        return { lock, handle: await lock.acquire() }
      },
      // lock objects are kept per key (1 or 64 of them), as an application would
      release: ({ lock, handle }) => lock.release(handle),
      close: () => closeAll(clients),
    }
  },
}

// The floor: no library, the same two round trips a lock needs (SET NX PX, EVALSHA release),
// on N nodes in parallel for the multi-node scenario.
contenders.floor = {
  label: 'floor: raw ioredis SET NX PX + EVALSHA',
  kind: 'floor',
  scenarios: [1, 2, 3, 4],
  async create({ urls, ttl, wait }) {
    const { RELEASE_LUA } = require('./handwritten')
    const clients = await connect(urls)
    const shas = await Promise.all(clients.map((c) => c.script('LOAD', RELEASE_LUA)))
    const quorum = Math.floor(urls.length / 2) + 1
    const attempt = async (key, token) => {
      if (clients.length === 1) return (await clients[0].set(key, token, 'PX', ttl, 'NX')) === 'OK'
      const r = await Promise.all(clients.map((c) => c.set(key, token, 'PX', ttl, 'NX')))
      if (r.filter((x) => x === 'OK').length >= quorum) return true
      await Promise.all(clients.map((c, i) => c.evalsha(shas[i], 1, key, token)))
      return false
    }
    return {
      async acquire(key) {
        const token = crypto.randomUUID()
        if (await attempt(key, token)) return { key, token }
        if (!wait) throw new Error(`${key} is held`)
        const deadline = Date.now() + wait.waitTimeout
        while (Date.now() < deadline) {
          await sleep(wait.retryDelay + Math.random() * wait.retryJitter)
          if (await attempt(key, token)) return { key, token }
        }
        throw new Error(`timed out waiting for ${key}`)
      },
      release({ key, token }) {
        if (clients.length === 1) return clients[0].evalsha(shas[0], 1, key, token)
        return Promise.all(clients.map((c, i) => c.evalsha(shas[i], 1, key, token)))
      },
      close: () => closeAll(clients),
    }
  },
}

module.exports = { contenders, sleep, path }
