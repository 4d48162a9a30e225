'use strict'

const { test, before, after, describe } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { LockClient } = require('lockdog')
const Redlock = require('lockdog/redlock')
const { ExecutionError } = Redlock
const { startRedis, inspector, runWorker, waitFor, aborted, sleep } = require('./helpers')

let servers = []
let inspectors = []

async function fresh(n) {
  // A fresh set of n nodes (some tests kill nodes).
  await Promise.all(servers.map((s) => s.stop()))
  inspectors.forEach((r) => r.disconnect())
  servers = await Promise.all(Array.from({ length: n }, () => startRedis()))
  inspectors = servers.map((s) => inspector(s))
  return servers.map((s) => s.url)
}

async function holders(key) {
  return Promise.all(inspectors.map((r) => r.get(key).catch(() => 'unreachable')))
}

// lockdog's watchdog never keeps Node alive (by design); the tests that only wait
// for a loss signal keep the event loop alive themselves.
const keepAlive = setInterval(() => {}, 1000)

after(async () => {
  clearInterval(keepAlive)
  inspectors.forEach((r) => r.disconnect())
  await Promise.all(servers.map((s) => s.stop()))
})

describe('LockClient with 3 nodes', () => {
  let nodes
  before(async () => {
    nodes = await fresh(3)
  })

  test('a nodeTimeout that would use up the validity is refused: at construction, and for a shorter ttl', async () => {
    const urls = servers.map((s) => s.url)
    // ttl 1,500 ms, drift 17 ms: a node allowed 1,868 ms would leave no validity.
    assert.throws(() => new LockClient({ nodes: urls, ttl: 1500, nodeTimeout: 1868 }), (e) => {
      assert.equal(e.code, 'ERR_OUT_OF_RANGE')
      assert.match(e.message, /nodeTimeout.*1483 ms for a ttl of 1500 ms/)
      return true
    })
    const locks = new LockClient({ nodes: urls, ttl: 10000, nodeTimeout: 1000 })
    try {
      assert.throws(() => locks.acquire('redlock:short-ttl', { ttl: 1000 }), { code: 'ERR_OUT_OF_RANGE' })
      assert.deepEqual(await holders('redlock:short-ttl'), [null, null, null])
      const lock = await locks.acquire('redlock:short-ttl', { ttl: 1100 })
      assert.equal(await lock.release(), true)
    } finally {
      await locks.close()
    }
    // One node: its commands may take as long as it is allowed.
    const one = new LockClient({ url: urls[0], ttl: 1500, nodeTimeout: 5000 })
    await one.close()
  })

  test('acquire, extend and release run on every node', async () => {
    const locks = new LockClient({ nodes })
    assert.equal(locks.nodes.length, 3)
    // Each operation resolves at quorum; once settled, every node has answered.
    const lock = await locks.acquire('rl:a', { ttl: 2000 })
    await locks.settled()
    assert.deepEqual(await holders('rl:a'), [lock.token, lock.token, lock.token])
    await lock.extend(5000)
    await locks.settled()
    for (const r of inspectors) assert.ok((await r.pttl('rl:a')) > 4000)
    assert.equal(await lock.release(), true)
    await locks.settled()
    assert.deepEqual(await holders('rl:a'), [null, null, null])
    await locks.close()
  })

  test('a minority paused: acquire resolves at quorum without waiting for it, its timeout still reported, watchdog keeps it', async () => {
    // The paused node's timeout is far above what a quorum of live nodes takes, even on a
    // loaded machine: an acquire that waited for the paused node takes at least nodeTimeout.
    // (A watchdog renewal still waits for every node, so the TTL leaves room for that.)
    const nodeTimeout = 400
    const locks = new LockClient({ nodes, nodeTimeout })
    await (await locks.acquire('rl:warm')).release()
    const errors = []
    locks.on('error', (e) => errors.push(e))
    servers[2].pause()
    try {
      const ttl = 3000
      const t0 = performance.now()
      const lock = await locks.acquire('rl:minority', { ttl })
      const took = performance.now() - t0
      assert.ok(took < nodeTimeout * 0.9, `acquire took ${took.toFixed(0)} ms: a quorum decided, the paused node was not waited for`)
      const drift = ttl * 0.01 + 2
      assert.ok(lock.remaining <= ttl - drift, `remaining ${lock.remaining.toFixed(0)}`)
      assert.ok(lock.remaining > ttl - drift - nodeTimeout * 0.9, `remaining ${lock.remaining.toFixed(0)} does not pay for the paused node`)
      // The paused node is finished in the background: settled() waits for its timeout.
      await locks.settled()
      await waitFor(async () => errors.some((e) => e.nodes?.[0]?.answer === 'timeout'), { what: "the paused node's timeout reported through 'error'" })
      // Past the ttl: only renewals by the two live nodes can keep it.
      await sleep(ttl * 1.5)
      assert.equal(lock.held, true, 'renewed by the two live nodes')
      const h = await Promise.all(inspectors.slice(0, 2).map((r) => r.get('rl:minority')))
      assert.deepEqual(h, [lock.token, lock.token])
      assert.equal(await lock.release(), true)
    } finally {
      servers[2].resume()
    }
    await waitFor(async () => (await inspectors[2].exists('rl:minority')) === 0, { what: 'paused node cleaned after resume' })
    await locks.close()
  })

  test('a majority down: ERR_LOCK_QUORUM fast with per-node detail, nothing left on the healthy node', async () => {
    const locks = new LockClient({ nodes, connectTimeout: 200 })
    servers[1].pause()
    servers[2].pause()
    try {
      const t0 = performance.now()
      await assert.rejects(locks.acquire('rl:majority', { ttl: 2000, retryCount: 0 }), (e) => {
        assert.equal(e.code, 'ERR_LOCK_QUORUM')
        assert.equal(e.nodes.length, 3)
        assert.equal(e.nodes[0].answer, 'ok')
        assert.ok(['timeout', 'unreachable'].includes(e.nodes[1].answer), e.nodes[1].answer)
        assert.match(e.message, new RegExp(`127\\.0\\.0\\.1:${servers[1].port}`))
        return true
      })
      assert.ok(performance.now() - t0 < 1000)
      // The cleanup release goes on in the background: the rejection does not wait for it.
      await waitFor(async () => (await inspectors[0].exists('rl:majority')) === 0, { what: 'released on the healthy node' })
    } finally {
      servers[1].resume()
      servers[2].resume()
    }
    await waitFor(async () => (await inspectors[1].exists('rl:majority')) + (await inspectors[2].exists('rl:majority')) === 0,
      { what: 'late writes on the resumed nodes released' })
    await locks.close()
  })

  test('after a contended attempt no stray key with our token remains', async () => {
    const locks = new LockClient({ nodes })
    await inspectors[0].set('rl:contended', 'other', 'PX', 10000)
    await inspectors[1].set('rl:contended', 'other', 'PX', 10000)
    await assert.rejects(locks.acquire('rl:contended', { retryCount: 2, retryDelay: 10 }), { code: 'ERR_LOCK_TAKEN' })
    await waitFor(async () => (await inspectors[2].exists('rl:contended')) === 0, { what: 'the free node was cleaned' })
    assert.deepEqual(await holders('rl:contended'), ['other', 'other', null])
    await inspectors[0].del('rl:contended')
    await inspectors[1].del('rl:contended')
    await locks.close()
  })

  test('multi-resource locks are all or nothing on every node', async () => {
    const locks = new LockClient({ nodes })
    const other = await locks.acquire('mr:b')
    await assert.rejects(locks.acquire(['mr:a', 'mr:b', 'mr:c'], { retryCount: 0 }), { code: 'ERR_LOCK_TAKEN' })
    // The failed attempt's undo runs in the background, within the node timeout.
    await waitFor(async () => {
      for (const r of inspectors) if (await r.exists('mr:a', 'mr:c')) return false
      return true
    }, { what: 'the failed attempt undone on every node' })
    await other.release()
    const lock = await locks.acquire(['mr:a', 'mr:b', 'mr:c'])
    // Operations resolve at quorum; every node has answered once settled.
    await locks.settled()
    for (const r of inspectors) assert.deepEqual(await r.mget('mr:a', 'mr:b', 'mr:c'), [lock.token, lock.token, lock.token])
    await lock.extend(4000)
    assert.equal(await lock.release(), true)
    await locks.settled()
    for (const r of inspectors) assert.equal(await r.exists('mr:a', 'mr:b', 'mr:c'), 0)
    await locks.close()
  })

  test('a fresh client with one node paused still acquires within the node timeout', async () => {
    servers[2].pause()
    try {
      const locks = new LockClient({ nodes, nodeTimeout: 100 })
      const t0 = performance.now()
      const lock = await locks.acquire('rl:fresh', { ttl: 2000 })
      const took = performance.now() - t0
      assert.ok(took < 800, `acquire took ${took.toFixed(0)} ms with a node that never connected`)
      assert.deepEqual(await Promise.all(inspectors.slice(0, 2).map((r) => r.get('rl:fresh'))), [lock.token, lock.token])
      const t1 = performance.now()
      assert.equal(await lock.release(), true)
      assert.ok(performance.now() - t1 < 1500, 'release does not wait for the paused node to connect')
      await locks.close()
    } finally {
      servers[2].resume()
    }
  })

  test('a majority dies while the lock is held: the signal aborts no later than the local deadline', async () => {
    const locks = new LockClient({ nodes, connectTimeout: 100, commandTimeout: 100 })
    const lock = await locks.acquire('rl:dies', { ttl: 900 })
    await sleep(100)
    await servers[1].kill()
    await servers[2].kill()
    const killedAt = performance.now()
    const deadline = killedAt + lock.remaining
    const at = await aborted(lock.signal)
    assert.ok(at <= deadline + 150, `aborted ${(at - deadline).toFixed(0)} ms after the deadline`)
    assert.equal(lock.signal.reason.code, 'ERR_LOCK_LOST')
    // The release to every node follows the loss signal.
    await waitFor(async () => (await inspectors[0].exists('rl:dies')) === 0, { what: 'release on the surviving node', timeout: 2000 })
    await locks.close()
  })
})

describe('5 nodes', () => {
  let nodes
  before(async () => {
    nodes = await fresh(5)
  })

  test('keys on all 5; two paused still acquire (3 of 5)', async () => {
    const locks = new LockClient({ nodes, nodeTimeout: 100 })
    const lock = await locks.acquire('five:a', { ttl: 3000 })
    await locks.settled()
    assert.equal((await holders('five:a')).filter((v) => v === lock.token).length, 5)
    await lock.release()
    servers[3].pause()
    servers[4].pause()
    try {
      const l2 = await locks.acquire('five:b', { ttl: 3000 })
      assert.equal((await Promise.all(inspectors.slice(0, 3).map((r) => r.get('five:b')))).filter((v) => v === l2.token).length, 3)
      await l2.release()
    } finally {
      servers[3].resume()
      servers[4].resume()
    }
    await locks.close()
  })

  test('mutual exclusion across processes on 5 nodes: an exact counter', async () => {
    const workers = 3
    const rounds = 25
    const runs = Array.from({ length: workers }, () => runWorker('counter.js', [nodes.join(','), 'five:mx', rounds]))
    const results = await Promise.all(runs.map((r) => r.exited))
    for (const r of results) assert.equal(r.code, 0, r.stderr)
    assert.equal(Number(await inspectors[0].get('five:mx:counter')), workers * rounds)
    for (const r of inspectors) assert.equal(await r.exists('five:mx'), 0)
  })
})

describe('the redlock package API', () => {
  let clients
  before(async () => {
    await fresh(3)
    clients = servers.map((s) => new Redis({ host: '127.0.0.1', port: s.port }))
  })
  after(() => clients.forEach((c) => c.disconnect()))

  test('acquire / extend / release with redlock\'s shapes; keys stored as redlock stores them', async () => {
    const redlock = new Redlock(clients, { retryCount: 3, retryDelay: 50 })
    const t0 = Date.now()
    let lock = await redlock.acquire(['locks:order:1'], 2000)
    assert.deepEqual(lock.resources, ['locks:order:1'])
    assert.ok(lock.expiration > t0 + 1900 && lock.expiration <= Date.now() + 2000)
    assert.equal(lock.attempts.length, 1)
    for (const c of clients) assert.equal(await c.get('locks:order:1'), lock.value)
    const old = lock
    lock = await lock.extend(5000)
    assert.equal(old.expiration, 0)
    assert.equal(lock.value, old.value)
    assert.ok(lock.expiration > Date.now() + 4500)
    assert.ok((await clients[0].pttl('locks:order:1')) > 4500)
    const result = await lock.release()
    assert.ok(Array.isArray(result.attempts))
    for (const c of clients) assert.equal(await c.exists('locks:order:1'), 0)
    // As in redlock: a release that finds nothing to release is a failed operation.
    await assert.rejects(old.release(), (e) => e instanceof ExecutionError && e.attempts.length === 4)
  })

  test('contention: ExecutionError with attempts and ResourceLockedError votes', async () => {
    const redlock = new Redlock(clients, { retryCount: 2, retryDelay: 20, retryJitter: 0 })
    const held = await redlock.acquire(['locks:busy'], 5000)
    const e = await redlock.acquire(['locks:busy'], 1000).then(() => null, (err) => err)
    assert.ok(e instanceof ExecutionError)
    assert.equal(e.code, 'ERR_LOCK_QUORUM')
    assert.equal(e.attempts.length, 3)
    const last = await e.attempts[2]
    assert.equal(last.membershipSize, 3)
    assert.equal(last.quorumSize, 2)
    assert.equal(last.votesAgainst.size, 3)
    assert.ok([...last.votesAgainst.values()].every((v) => v instanceof Redlock.ResourceLockedError))
    assert.ok([...last.votesAgainst.keys()].every((c) => clients.includes(c)), 'votes name the caller\'s clients')
    await held.release()
  })

  test('no lock is handed back already expired; an expired lock cannot be extended, and its release rejects', async () => {
    const redlock = new Redlock(clients, { retryCount: 0 })
    const lock = await redlock.acquire(['locks:short'], 150)
    assert.ok(lock.expiration > Date.now())
    await waitFor(async () => Date.now() > lock.expiration + 20 && (await clients[0].exists('locks:short')) === 0, { what: 'expiry' })
    await assert.rejects(lock.extend(1000), (e) => e instanceof ExecutionError)
    await assert.rejects(lock.release(), (e) => e instanceof ExecutionError && e.attempts.length === 1)
  })

  test('using renews natively, hands the routine a signal, settles and releases', async () => {
    const redlock = new Redlock(clients)
    const out = await redlock.using(['locks:using'], 300, { automaticExtensionThreshold: 100 }, async (signal) => {
      await sleep(900)
      assert.equal(signal.aborted, false)
      for (const c of clients) assert.ok(await c.exists('locks:using'))
      return 'finished'
    })
    assert.equal(out, 'finished')
    for (const c of clients) assert.equal(await c.exists('locks:using'), 0)
    // A loss aborts the signal, and using rejects (its release finds the lock gone),
    // with the routine's result as the cause.
    const lost = redlock.using(['locks:using2'], 300, { retryCount: 0, automaticExtensionThreshold: 100 }, async (signal) => {
      await Promise.all(clients.map((c) => c.del('locks:using2')))
      await aborted(signal)
      return signal.error && signal.error.code
    })
    await assert.rejects(lost, (e) => e instanceof ExecutionError && e.code === 'ERR_LOCK_LOST' && e.cause === 'ERR_LOCK_LOST')
    // Taken over before any renewal noticed: the release is what finds it.
    const other = new Redlock(clients, { retryCount: 0 })
    let theirs
    const taken = redlock.using(['locks:using4'], 5000, { retryCount: 0 }, async () => {
      await Promise.all(clients.map((c) => c.del('locks:using4')))
      theirs = await other.acquire(['locks:using4'], 5000)
      return 'routine result'
    })
    await assert.rejects(taken, (e) => e instanceof ExecutionError && e.code === 'ERR_LOCK_LOST' && e.cause === 'routine result')
    for (const c of clients) assert.equal(await c.get('locks:using4'), theirs.value)
    await theirs.release()
    await assert.rejects(redlock.using(['locks:using3'], 600, async () => { throw new Error('routine failed') }), /routine failed/)
    for (const c of clients) assert.equal(await c.exists('locks:using3'), 0)
  })

  test('on(\'error\') gets node failures; no crash without a listener', async () => {
    const errors = []
    const redlock = new Redlock(clients, { retryCount: 0 })
    redlock.on('error', (e) => errors.push(e))
    servers[2].pause()
    try {
      const lock = await redlock.acquire(['locks:err'], 2000)
      await lock.release()
      const silent = new Redlock(clients, { retryCount: 0 })
      const l2 = await silent.acquire(['locks:err2'], 2000)
      await l2.release()
    } finally {
      servers[2].resume()
    }
    assert.ok(errors.length >= 1)
    assert.equal(errors[0].message, 'Connection is closed.')
    assert.match(errors[0].cause.message, new RegExp(`${servers[2].port}`))
  })

  test('the second article\'s processOrder / processLongTask code runs unchanged but for its require line', async () => {
    const events = []
    const w = runWorker('seed-redlock.js', [], {
      env: { REDIS_PORTS: servers.map((s) => s.port).join(','), LONG_TASK_MS: 3000 },
      onLine: (l) => events.push(l.event || l.text),
    })
    await waitFor(() => events.includes('long-start'), { what: 'the long task' })
    let checks = 0
    while (!events.includes('long-end')) {
      const values = await Promise.all(clients.map((c) => c.get('locks:order:1002')))
      if (!events.includes('long-end')) {
        assert.ok(values.filter(Boolean).length >= 2, 'the long task keeps its lock past the 2000 ms TTL')
        checks++
      }
      await sleep(100)
    }
    assert.ok(checks >= 20, `checked ${checks} times`)
    const result = await w.exited
    assert.equal(result.code, 0, result.stderr)
    assert.ok(events.includes('获取锁成功'))
    assert.ok(events.filter((e) => e === '锁已续期').length >= 2)
    assert.ok(events.includes('done'))
    assert.doesNotMatch(result.stderr, /失败|error/i)
    for (const c of clients) assert.equal(await c.exists('locks:order:1001', 'locks:order:1002'), 0)
  })
})
