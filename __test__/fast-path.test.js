'use strict'

// The fast path (commands written on the JS thread, replies read by a libuv
// poll on its loop) and the tokio path must behave alike: every test runs on
// both, the tokio one with LOCKDOG_FAST_PATH=0 set when the client is made.

const { test, before, after, afterEach, describe } = require('node:test')
const assert = require('node:assert/strict')
const { Worker } = require('node:worker_threads')
const { LockClient } = require('lockdog')
const { startRedis, inspector, runWorker, waitFor, lockClient, freePort } = require('./helpers')
const { RedisServer } = require('../scripts/local-redis')

let servers = []
let probes = []
let clients = []

afterEach(async () => {
  // A failed test's client must not leave a fast connection to the next test.
  await Promise.all(clients.map((c) => c.close()))
  clients = []
})

before(async () => {
  servers = await Promise.all([0, 1, 2].map(() => startRedis()))
  probes = servers.map((s) => inspector(s))
})

after(async () => {
  probes.forEach((p) => p.disconnect())
  await Promise.all(servers.map((s) => s.stop()))
})

function client(fast, options) {
  const locks = lockClient(fast, options)
  clients.push(locks)
  return locks
}

/** The fast connections a server sees, with the last command each ran. */
/** A connection's last command was a release: the script, or DELIFEQ's notice after it where the server has DELIFEQ. */
const released = (cmd) => cmd === 'evalsha' || cmd === 'publish'

async function fastConns(probe) {
  const list = await probe.client('LIST')
  return list
    .split('\n')
    .filter((l) => l.includes('name=lockdog-fast'))
    .map((l) => /cmd=(\S+)/.exec(l)?.[1])
}

/** Uses the client until every node has its fast connection (none when off). */
async function warm(locks, fast, n = 1) {
  const key = `warm:${Math.random()}`
  await waitFor(async () => {
    await (await locks.acquire(key, { ttl: 2000 })).release()
    const conns = await Promise.all(probes.slice(0, n).map(fastConns))
    return conns.every((c) => c.length >= 1)
  }, { what: 'fast connections', timeout: fast ? 10000 : 500 }).catch((e) => {
    if (fast) throw e
  })
  if (!fast) {
    const conns = await Promise.all(probes.slice(0, n).map(fastConns))
    assert.deepEqual(conns.flat(), [], 'no fast connection when switched off')
  }
}

/**
 * Runs `fn` with a server of the test's own (which it may pause), a probe on it, and a client
 * (`options` besides its url) that has used `key` until its fast connection, with `fast`, is up.
 */
async function onOwnServer(fast, options, key, fn) {
  const server = await startRedis()
  const probe = inspector(server)
  try {
    const locks = client(fast, { url: server.url, ...options })
    await waitFor(async () => {
      await (await locks.acquire(key, { ttl: 2000 })).release()
      return !fast || (await fastConns(probe)).length === 1
    }, { what: 'a fast connection' })
    await fn({ server, probe, locks })
    await locks.close()
  } finally {
    probe.disconnect()
    await server.stop()
  }
}

for (const fast of [true, false]) {
  describe(fast ? 'fast path' : 'tokio path (LOCKDOG_FAST_PATH=0)', () => {
    test('acquire, extend and release on one node', async () => {
      const locks = client(fast, { url: servers[0].url })
      await warm(locks, fast)
      const lock = await locks.acquire('fast:one', { ttl: 2000 })
      if (fast) assert.deepEqual(await fastConns(probes[0]), ['set'], 'the fast connection ran it (the first attempt: SET NX PX)')
      assert.equal(await probes[0].get('fast:one'), lock.token)
      assert.equal(lock.attempts, 1)
      assert.deepEqual(lock.nodes.map((n) => n.answer), ['ok'])
      await lock.extend(20000)
      assert.ok((await probes[0].pttl('fast:one')) > 10000)
      assert.equal(lock.ttl, 20000)
      assert.equal(await lock.release(), true)
      assert.equal(await probes[0].exists('fast:one'), 0)
      assert.equal(await lock.release(), false)
      await locks.close()
    })

    test('contention: tryAcquire answers null, a waiter gets the lock when it is released', async () => {
      const locks = client(fast, { url: servers[0].url })
      await warm(locks, fast)
      const held = await locks.acquire('fast:busy', { ttl: 5000 })
      assert.equal(await locks.tryAcquire('fast:busy'), null)
      const waiting = locks.acquire('fast:busy', { ttl: 5000, waitTimeout: 5000, retryDelay: 50 })
      setTimeout(() => held.release(), 100)
      const lock = await waiting
      assert.ok(lock.attempts >= 2, `took ${lock.attempts} attempts`)
      assert.equal(await probes[0].get('fast:busy'), lock.token)
      await assert.rejects(locks.acquire('fast:busy', { retryCount: 0 }), { code: 'ERR_LOCK_TAKEN' })
      await assert.rejects(locks.acquire('fast:busy', { waitTimeout: 0 }), { code: 'ERR_LOCK_TIMEOUT' })
      await lock.release()
      await locks.close()
    })

    test('close() ends an acquisition waiting for its next attempt with ERR_LOCK_CLOSED at once', async () => {
      const holder = client(fast, { url: servers[0].url })
      const locks = client(fast, { url: servers[0].url })
      await warm(locks, fast)
      const held = await holder.acquire('fast:closing', { ttl: 10000 })
      const began = Date.now()
      const waiting = locks.acquire('fast:closing', { ttl: 5000, retryDelay: 8000, waitTimeout: 20000 })
      const outcome = waiting.then(() => 'took the lock', (e) => e)
      // Waiting in line: the client's subscriber connection listens for the key's releases.
      await waitFor(async () => (await probes[0].pubsub('NUMSUB', '__lockdog:released:fast:closing'))[1] >= 1, {
        what: 'the waiter in line',
      })
      await locks.close()
      const err = await outcome
      assert.equal(err.code, 'ERR_LOCK_CLOSED', String(err))
      assert.ok(Date.now() - began < 4000, `ended by close(), not by its 8 s pause: ${Date.now() - began} ms`)
      assert.equal(await probes[0].get('fast:closing'), held.token, 'the holder still holds it')
      assert.equal(await held.release(), true)
    })

    test('an acquisition aborted at any moment leaves no key behind: its undo runs after its attempt', async () => {
      const locks = client(fast, { url: servers[0].url })
      await warm(locks, fast)
      const outcomes = { taken: 0, aborted: 0 }
      // The abort lands before the attempt, while it is in flight, or after it was answered.
      const aborts = [(ac) => ac.abort(), (ac) => queueMicrotask(() => ac.abort()), (ac) => setImmediate(() => ac.abort()), (ac) => setTimeout(() => ac.abort(), 0)]
      for (let i = 0; i < 200; i++) {
        const ac = new AbortController()
        const pending = locks.acquire(`fast:abort-any:${i}`, { ttl: 60000, signal: ac.signal })
        aborts[i % aborts.length](ac)
        try {
          await (await pending).release()
          outcomes.taken++
        } catch (e) {
          assert.equal(e.code, 'ERR_LOCK_ABORTED', String(e))
          outcomes.aborted++
        }
      }
      await locks.settled()
      assert.ok(outcomes.aborted > 0, `some were aborted: ${JSON.stringify(outcomes)}`)
      assert.deepEqual(await probes[0].keys('fast:abort-any:*'), [], 'no key held by nobody until its TTL')
    })

    test('a release that finds the key taken over is a loss', async () => {
      const locks = client(fast, { url: servers[0].url })
      await warm(locks, fast)
      const lock = await locks.acquire('fast:stolen', { ttl: 5000 })
      await probes[0].set('fast:stolen', 'someone else')
      assert.equal(await lock.release(), false)
      assert.equal(await probes[0].get('fast:stolen'), 'someone else')
      await assert.rejects(lock.extend(1000), { code: 'ERR_LOCK_LOST' })
      await probes[0].del('fast:stolen')
      await locks.close()
    })

    test('Redlock on 3 nodes: acquire, extend, release', async () => {
      const locks = client(fast, { nodes: servers.map((s) => s.url) })
      await warm(locks, fast, 3)
      const lock = await locks.acquire('fast:rl', { ttl: 3000 })
      await locks.settled()
      assert.deepEqual(lock.nodes.map((n) => n.answer), ['ok', 'ok', 'ok'])
      for (const p of probes) assert.equal(await p.get('fast:rl'), lock.token)
      await lock.extend(30000)
      await locks.settled()
      for (const p of probes) assert.ok((await p.pttl('fast:rl')) > 20000)
      assert.equal(await lock.release(), true)
      await locks.settled()
      for (const p of probes) assert.equal(await p.exists('fast:rl'), 0)
      await locks.close()
    })

    test('a flushed script cache (NOSCRIPT) is recovered', async () => {
      const locks = client(fast, { url: servers[0].url })
      await warm(locks, fast)
      await probes[0].script('FLUSH')
      const lock = await locks.acquire('fast:noscript', { ttl: 2000 })
      await probes[0].script('FLUSH')
      await lock.extend(5000)
      await probes[0].script('FLUSH')
      assert.equal(await lock.release(), true)
      assert.equal(await probes[0].exists('fast:noscript'), 0)
      await locks.close()
    })

    test('a stalled node fails the operation within its timeout, and the next ones recover', async () => {
      const key = 'fast:stalled'
      await onOwnServer(fast, { commandTimeout: 300 }, key, async ({ server, probe, locks }) => {
        server.pause()
        const t0 = performance.now()
        const err = await locks.acquire(key, { ttl: 2000, waitTimeout: 0 }).catch((e) => e)
        const took = performance.now() - t0
        server.resume()
        assert.equal(err.code, 'ERR_LOCK_CONNECTION', err.message)
        assert.ok(took >= 250 && took < 1500, `failed after ${took} ms`)
        // The attempt ran once the node went on, and its undo after it: no ghost key.
        await waitFor(async () => (await probe.exists(key)) === 0, { what: 'no ghost key after the timed-out attempt', timeout: 3000 })
        await waitFor(async () => {
          const lock = await locks.acquire(key, { ttl: 2000, waitTimeout: 0 }).catch(() => null)
          if (!lock) return false
          await lock.release()
          return !fast || (await fastConns(probe)).some(released)
        }, { what: 'an acquisition after the stall' })
      })
    })

    test('a waitTimeout shorter than the node timeout ends an attempt on a stalled node at the wait, and its undo runs after it', async () => {
      const key = 'fast:short-wait'
      await onOwnServer(fast, { commandTimeout: 5000 }, key, async ({ server, probe, locks }) => {
        server.pause()
        const t0 = performance.now()
        const err = await locks.acquire(key, { ttl: 10000, waitTimeout: 300 }).catch((e) => e)
        const took = performance.now() - t0
        server.resume()
        assert.equal(err.code, 'ERR_LOCK_TIMEOUT', err.message)
        assert.ok(took >= 250 && took < 3000, `failed after ${took} ms, not at the 300 ms wait (the node timeout is 5000)`)
        // The attempt ran once the node went on, and its undo after it: no ghost key.
        await waitFor(async () => (await probe.exists(key)) === 0, { what: 'no ghost key after the abandoned attempt', timeout: 3000 })
        const lock = await locks.acquire(key, { ttl: 2000, waitTimeout: 2000 })
        await lock.release()
      })
    })

    test('an abort mid-attempt on a stalled node rejects at once, and its undo runs after the attempt', async () => {
      const key = 'fast:abort-stalled'
      await onOwnServer(fast, { commandTimeout: 5000 }, key, async ({ server, probe, locks }) => {
        server.pause()
        const ac = new AbortController()
        const pending = locks.acquire(key, { ttl: 10000, signal: ac.signal }).catch((e) => e)
        await new Promise((resolve) => setTimeout(resolve, 100))
        const t0 = performance.now()
        ac.abort()
        const err = await pending
        const took = performance.now() - t0
        server.resume()
        assert.equal(err.code, 'ERR_LOCK_ABORTED', err.message)
        assert.ok(took < 2500, `rejected ${took} ms after the abort, not at it (the node timeout is 5000)`)
        // The attempt ran once the node went on, and its undo after it: no ghost key.
        await waitFor(async () => (await probe.exists(key)) === 0, { what: 'no ghost key after the aborted attempt', timeout: 3000 })
        const lock = await locks.acquire(key, { ttl: 2000, waitTimeout: 2000 })
        await lock.release()
      })
    })

    test('a restarted server is reconnected to', async () => {
      const server = await startRedis()
      let probe = inspector(server)
      try {
        const locks = client(fast, { url: server.url, commandTimeout: 500 })
        await waitFor(async () => {
          await (await locks.acquire('fast:restart', { ttl: 2000 })).release()
          return !fast || (await fastConns(probe)).length === 1
        }, { what: 'a fast connection' })
        probe.disconnect()
        await server.restart()
        probe = inspector(server)
        await waitFor(async () => {
          const lock = await locks.acquire('fast:restart', { ttl: 2000, waitTimeout: 0 }).catch(() => null)
          if (!lock) return false
          assert.equal(await lock.release(), true)
          return !fast || (await fastConns(probe)).some(released)
        }, { what: 'an acquisition through a new connection' })
        await locks.close()
      } finally {
        probe.disconnect()
        await server.stop()
      }
    })
  })
}

test('on the JS thread, a release hands the key to a waiter of the same client at once when nobody else listens for it', async () => {
  const fast = true
  // A user without channel rights: no release notice reaches any subscriber,
  // so only the client's own release can wake its waiter before its timer.
  const user = 'localhandoff'
  await probes[0].acl('SETUSER', user, 'on', '>local-pw', '~*', 'resetchannels', '+@all')
  const locks = client(fast, { url: `redis://${user}:local-pw@127.0.0.1:${servers[0].port}` })
  const errors = []
  locks.on('error', (e) => errors.push(e))
  await warm(locks, fast)
  const key = 'fast:handoff'
  const held = await locks.acquire(key, { ttl: 30000 })
  const { contended, woken } = locks.stats()
  const waiting = locks.acquire(key, { ttl: 5000, retryDelay: 20000, retryJitter: 0, waitTimeout: 60000 })
  await waitFor(() => locks.stats().contended > contended, { what: 'the waiter to find the key held' })
  const released = Date.now()
  assert.equal(await held.release(), true)
  const lock = await waiting
  assert.ok(Date.now() - released < 5000, `handed over at once, not after the 20 s retry delay (${Date.now() - released} ms)`)
  assert.equal(lock.attempts, 2)
  assert.equal(locks.stats().woken, woken + 1, 'the release woke it')
  assert.equal(await probes[0].get(key), lock.token)
  assert.equal(await lock.release(), true)
  assert.deepEqual(errors, [])
  await locks.close()
})

test('a process that used the fast path ends by itself, and not before its acquisition waiting on a timer', async () => {
  for (const mode of ['close', 'open', 'waits']) {
    const run = runWorker('fast-exits.js', [servers[0].url, mode])
    const timer = setTimeout(() => run.child.kill('SIGKILL'), 20000)
    const r = await run.exited
    clearTimeout(timer)
    assert.equal(r.signal ?? null, null, `the ${mode} process did not end by itself within 20 s`)
    assert.equal(r.code, 0, r.stderr)
    const last = r.lines.at(-1)
    assert.equal(last?.done, mode, `the ${mode} process said it was done: ${JSON.stringify(r.lines)}`)
    if (mode === 'waits') assert.ok(last.attempts >= 2, `waited for the held key: ${last.attempts} attempts`)
    else assert.equal(last.attempts, 1)
  }
})

test('commands corked on the JS thread go out from whatever phase of the loop sends them', async () => {
  const locks = client(true, { url: servers[0].url })
  const key = (k) => `cork:${k}`
  const taken = await Promise.all([
    new Promise((resolve, reject) => setImmediate(() => locks.acquire(key('immediate')).then(resolve, reject))),
    new Promise((resolve, reject) => setTimeout(() => locks.acquire(key('timer')).then(resolve, reject), 1)),
    new Promise((resolve, reject) => process.nextTick(() => locks.acquire(key('tick')).then(resolve, reject))),
    // Sent from another socket's reply: inside that socket's poll callback.
    probes[0].ping().then(() => locks.acquire(key('other-socket'))),
    // A burst of one turn, past the size written at once.
    ...Array.from({ length: 300 }, (_, i) => locks.acquire(key(`burst:${i}`))),
  ])
  assert.equal(taken.length, 304)
  assert.equal(locks.stats().onTokio, 0, 'every acquisition ran on the JS thread')
  assert.equal(await probes[0].exists(key('immediate'), key('timer'), key('tick'), key('other-socket')), 4)
  const released = await Promise.all(taken.map((l) => l.release()))
  assert.ok(released.every((r) => r === true))
  assert.equal(await probes[0].exists(key('immediate'), key('burst:0'), key('burst:299')), 0)
})

/** Every command a server runs from now on, with the address it came from. */
async function monitorOf(probe) {
  const seen = []
  const monitor = await probe.monitor()
  monitor.on('monitor', (time, args, source) => seen.push({ args: args.map(String), source }))
  return { seen, stop: () => monitor.disconnect() }
}

/** The addresses of the fast connections a server sees. */
async function fastAddrs(probe) {
  const list = await probe.client('LIST')
  return list
    .split('\n')
    .filter((l) => l.includes('name=lockdog-fast'))
    .map((l) => /addr=(\S+)/.exec(l)?.[1])
}

/** How each kind of acquisition is held by one client and waited for by another. */
const KINDS = {
  plain: { hold: (c, key) => c.acquire(key, { ttl: 10000 }), wait: (c, key, opts) => c.acquire(key, opts) },
  signal: {
    hold: (c, key) => c.acquire(key, { ttl: 10000 }),
    wait: (c, key, opts) => c.acquire(key, { ...opts, signal: new AbortController().signal }),
  },
  waitTimeout: {
    hold: (c, key) => c.acquire(key, { ttl: 10000 }),
    wait: (c, key, opts) => c.acquire(key, { ...opts, waitTimeout: 8000 }),
  },
  semaphore: {
    hold: (c, key) => c.semaphore(key, { limit: 2 }).acquire({ ttl: 10000, permits: 2 }),
    wait: (c, key, opts) => c.semaphore(key, { limit: 2 }).acquire(opts),
  },
  'write lock': {
    hold: (c, key) => c.readWriteLock(key).readLock({ ttl: 10000 }),
    wait: (c, key, opts) => c.readWriteLock(key).writeLock(opts),
  },
  // The release hands the key to the waiter, who holds it without another attempt.
  'fair lock': {
    hold: (c, key) => c.acquire(key, { ttl: 10000, fair: true }),
    wait: (c, key, opts) => c.acquire(key, { ...opts, fair: true }),
    attempts: 1,
  },
  'fair semaphore': {
    hold: (c, key) => c.semaphore(key, { limit: 2, fair: true }).acquire({ ttl: 10000, permits: 2 }),
    wait: (c, key, opts) => c.semaphore(key, { limit: 2, fair: true }).acquire(opts),
  },
}

for (const [how, kind] of Object.entries(KINDS)) {
  test(`a contended acquisition (${how}) runs on the JS thread from first attempt to outcome: a release notice wakes it there`, async () => {
    const holder = client(false, { url: servers[0].url })
    const locks = client(true, { url: servers[0].url })
    await warm(locks, true)
    const key = `fast:whole:${how}`
    const held = await kind.hold(holder, key)
    const monitor = await monitorOf(probes[0])
    try {
      const { woken, onTokio } = locks.stats()
      const waiting = kind.wait(locks, key, { ttl: 10000, retryDelay: 3000 })
      // In line once the client's subscriber connection listens for the key's releases.
      await waitFor(async () => (await probes[0].pubsub('NUMSUB', `__lockdog:released:${key}`))[1] >= 1, {
        what: 'the waiter subscribed',
      })
      const released = Date.now()
      assert.equal(await held.release(), true)
      const lock = await waiting
      assert.ok(Date.now() - released < 2500, 'woken by the release, not by its 3 s retry timer')
      assert.equal(locks.stats().woken, woken + 1, 'a release notice woke it')
      assert.equal(locks.stats().onTokio, onTokio, 'no tokio task ran the acquisition')
      assert.equal(await lock.release(), true)
      // What scripts run inside the server shows as coming from 'lua'; a
      // DELIFEQ's notice (PUBLISH) goes with it.
      const ours = () => monitor.seen.filter((c) => c.source !== 'lua' && c.args.includes(lock.token) && !/^publish$/i.test(c.args[0]))
      assert.ok(lock.attempts >= (kind.attempts ?? 2), `contended first: ${lock.attempts} attempts`)
      await waitFor(() => ours().length >= lock.attempts + 1, { what: 'the attempts and the release on the monitor' })
      const fast = await fastAddrs(probes[0])
      assert.equal(fast.length, 1, 'one fast connection')
      assert.deepEqual(
        ours().filter((c) => c.source !== fast[0]),
        [],
        'every command of the acquisition (and its release) went out on the JS thread\'s connection',
      )
      assert.equal(lock.attempts, ours().length - 1, 'each attempt is on the monitor once')
    } finally {
      monitor.stop()
    }
  })
}

test('a fresh client\'s first acquisitions, of every kind, run on the JS thread: they wait for its connections to open', async () => {
  for (const fast of [true, false]) {
    const locks = client(fast, { url: servers[1].url })
    const controller = new AbortController()
    const key = `fast:first:${fast}`
    // Made at once, before any connection of the client is open.
    const taking = [
      locks.acquire(`${key}:lock`, { ttl: 10000 }),
      locks.acquire(`${key}:signal`, { ttl: 10000, signal: controller.signal, waitTimeout: 3000 }),
      locks.semaphore(`${key}:sem`, { limit: 3 }).acquire({ ttl: 10000, permits: 2 }),
      locks.readWriteLock(`${key}:rw`).writeLock({ ttl: 10000 }),
      locks.readWriteLock(`${key}:rw2`).readLock({ ttl: 10000 }),
      locks.acquire(`${key}:fair`, { ttl: 10000, fair: true }),
      locks.semaphore(`${key}:fairsem`, { limit: 2, fair: true }).acquire({ ttl: 10000 }),
    ]
    const held = await Promise.all(taking)
    assert.equal(locks.stats().onTokio, fast ? 0 : taking.length, `onTokio (${fast ? 'fast path' : 'tokio path'})`)
    for (const lock of held) assert.equal(await lock.release(), true)
  }
})

test('an acquisition begun before its server is up waits it out on the JS thread, and the watchdog keeps what it took', async () => {
  const server = new RedisServer(await freePort(), [])
  try {
    const locks = client(true, { url: server.url, connectTimeout: 500 })
    const errors = []
    locks.on('error', (e) => errors.push(e))
    const taking = locks.acquire('fast:late-server', { ttl: 900, retryDelay: 50, waitTimeout: 8000 })
    await waitFor(() => errors.length >= 1, { what: 'a connection refused, reported' })
    assert.equal(errors[0].code, 'ERR_LOCK_CONNECTION')
    await server.start()
    const lock = await taking
    assert.equal(locks.stats().onTokio, 0, 'no tokio task ran the acquisition')
    const probe = inspector(server)
    try {
      // Renewed on the runtime's connections (the watchdog's): two TTLs later it is still ours.
      const renewed = locks.stats().renewed
      await waitFor(() => locks.stats().renewed >= renewed + 3, { what: 'three renewals' })
      assert.equal(lock.held, true)
      assert.equal(await probe.get('fast:late-server'), lock.token)
      assert.equal(await lock.release(), true)
    } finally {
      probe.disconnect()
    }
  } finally {
    await Promise.all(clients.map((c) => c.close()))
    clients = []
    await server.stop()
  }
})

test('a semaphore on several nodes (Redlock slots) is taken and given back on the JS thread', async () => {
  const holder = client(false, { nodes: servers.map((s) => s.url) })
  const locks = client(true, { nodes: servers.map((s) => s.url) })
  await warm(locks, true, 3)
  const key = 'fast:slots'
  const held = await holder.semaphore(key, { limit: 2 }).acquire({ ttl: 10000, permits: 2 })
  const { onTokio } = locks.stats()
  const waiting = locks.semaphore(key, { limit: 2 }).acquire({ ttl: 10000, retryDelay: 50, waitTimeout: 5000 })
  setTimeout(() => held.release(), 100)
  const lock = await waiting
  assert.ok(lock.attempts >= 2, `contended first: ${lock.attempts} attempts`)
  assert.match(lock.token, /^1:\d+:/, 'the holder keeps the member naming its slot')
  for (const probe of probes) assert.deepEqual(await probe.zrange(key, 0, -1), [lock.token])
  assert.equal(await lock.release(), true)
  for (const probe of probes) assert.equal(await probe.exists(key), 0)
  assert.equal(locks.stats().onTokio, onTokio, 'no tokio task ran the acquisition')
})

test('worker threads have fast paths of their own', async () => {
  const code = `
    const { parentPort, workerData } = require('node:worker_threads')
    const { LockClient } = require(workerData.root)
    ;(async () => {
      const locks = new LockClient({ url: workerData.url })
      for (let i = 0; i < 200; i++) {
        const lock = await locks.acquire('fast:worker:' + workerData.id, { ttl: 2000 })
        if (!(await lock.release())) throw new Error('release failed')
      }
      await locks.close()
      parentPort.postMessage('done')
    })().catch((e) => { parentPort.postMessage(String(e && e.stack)) })
  `
  const root = require('node:path').join(__dirname, '..')
  const run = (id) =>
    new Promise((resolve, reject) => {
      const w = new Worker(code, { eval: true, workerData: { url: servers[0].url, id, root } })
      let said
      w.on('message', (m) => { said = m })
      w.on('error', reject)
      w.on('exit', (exitCode) => resolve({ said, exitCode }))
    })
  const results = await Promise.all([run(1), run(2)])
  for (const r of results) assert.deepEqual(r, { said: 'done', exitCode: 0 })
})
