'use strict'

// A worker thread terminated while its client's operations are in flight
// (acquire/release, withLock, a semaphore's tryAcquire): its locks are never
// renewed again (each key lapses within its TTL or is released) and its Redis
// connections close, on both paths.

const { test, before, after, describe } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { Worker } = require('node:worker_threads')
const { serverAndClient } = require('./helpers')

// Loaded on the main thread only by the last tests (loading it keeps the runtime up).
let LockClient
const loadLockdog = () => (LockClient = require('lockdog').LockClient)

const TTL = 2000
let server
let probe

serverAndClient({}, (s) => ({ server, redis: probe } = s))

const CODE = `
  const { workerData, parentPort } = require('node:worker_threads')
  const { LockClient } = require(workerData.root)
  const { url, prefix, ttl } = workerData
  const locks = new LockClient({ url, keyPrefix: prefix })
  locks.on('lost', () => {})
  locks.on('error', () => {})
  const sem = locks.semaphore('s', { limit: 3, ttl })
  const pause = (ms) => new Promise((r) => setTimeout(r, ms))
  const loops = [
    async (i) => { const l = await locks.acquire('a' + (i % 3), { ttl, waitTimeout: 5000 }); await pause(i % 7); await l.release() },
    async (i) => { await locks.withLock('w' + (i % 2), () => pause(i % 5), { ttl, waitTimeout: 5000 }) },
    async () => { const p = await sem.tryAcquire(); if (p) { await pause(2); await p.release() } },
    async (i) => { await locks.acquire('h' + i, { ttl }) }, // held until the end
  ]
  let ops = 0
  for (const loop of loops) {
    for (let lane = 0; lane < 2; lane++) {
      ;(async () => {
        for (let i = 0; ; i++) {
          try { await loop(i * 2 + lane) } catch {}
          if (++ops === 20) parentPort.postMessage('busy')
        }
      })()
    }
  }
  // Told to end on its own: an exit or an uncaught error, operations in flight.
  parentPort.on('message', (how) => {
    if (how === 'exit') process.exit(0)
    if (how === 'throw') setImmediate(() => { throw new Error('worker gives up') })
  })
`

/** How many clients the server has besides the probe (only the fast path's, by name). */
async function connections(fastOnly = false) {
  const list = await probe.client('LIST')
  return list
    .split('\n')
    .filter((l) => l.trim() && !/ cmd=client\|list /.test(l))
    .filter((l) => !fastOnly || / name=lockdog-fast /.test(l)).length
}

async function keysUnder(prefix) {
  const found = new Set()
  let cursor = '0'
  do {
    const [next, keys] = await probe.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    cursor = next
    keys.forEach((k) => found.add(k))
  } while (cursor !== '0')
  return [...found]
}

async function round(prefix, fastPath, how = 'terminate') {
  const saved = process.env.LOCKDOG_FAST_PATH
  if (!fastPath) process.env.LOCKDOG_FAST_PATH = '0'
  const workers = []
  // The native side reads the variable when a worker makes its client.
  try {
    for (let w = 0; w < 3; w++) {
      const worker = new Worker(CODE, {
        eval: true,
        env: { ...process.env },
        workerData: { url: server.url, prefix: `${prefix}${w}:`, ttl: TTL, root: path.join(__dirname, '..') },
      })
      const busy = new Promise((resolve, reject) => {
        worker.once('message', resolve)
        if (how === 'terminate') worker.once('error', reject)
      })
      const exited = new Promise((resolve) => worker.once('exit', resolve))
      if (how === 'throw') worker.on('error', () => {})
      workers.push({ worker, busy, exited })
    }
    await Promise.all(workers.map((w) => w.busy))
  } finally {
    if (saved === undefined) delete process.env.LOCKDOG_FAST_PATH
    else process.env.LOCKDOG_FAST_PATH = saved
  }
  // Terminated (or told to exit or throw) at random moments, with operations in flight.
  await Promise.all(
    workers.map(async ({ worker, exited }) => {
      await new Promise((r) => setTimeout(r, Math.random() * 60))
      if (how === 'terminate') await worker.terminate()
      else {
        worker.postMessage(how)
        await exited
      }
    }),
  )
  return performance.now()
}

async function terminatedWorkersLetGo(fastPath, tag, { fastOnly = false, how = 'terminate' } = {}) {
  const before = await connections(fastOnly)
  const prefixes = []
  const ended = []
  for (let r = 0; r < 3; r++) {
    const prefix = `wt:${tag}${fastPath ? 'f' : 't'}${r}:`
    prefixes.push(prefix)
    ended.push(await round(prefix, fastPath, how))
    if (process.env.WT_DEBUG) console.error('round', r, await probe.client('LIST'))
  }
  const touched = (await Promise.all(prefixes.map(keysUnder))).flat()
  // No key is renewed once its worker is gone: its PTTL only falls, and it
  // is gone within its TTL (plus scheduling slack) of the termination.
  const last = new Map()
  const deadline = ended[ended.length - 1] + TTL + 1500
  for (;;) {
    const left = (await Promise.all(prefixes.map(keysUnder))).flat()
    for (const key of left) {
      const pttl = await probe.pttl(key)
      if (pttl < 0) continue
      const prev = last.get(key)
      assert.ok(prev === undefined || pttl <= prev + 50, `${key} was renewed after its worker ended (${prev} -> ${pttl} ms)`)
      last.set(key, pttl)
    }
    if (left.length === 0) break
    assert.ok(performance.now() < deadline, `keys still there ${TTL} ms after their workers ended: ${left.slice(0, 5).join(', ')} (${left.length})`)
    await new Promise((r) => setTimeout(r, 100))
  }
  const closedBy = performance.now() + 3000
  while ((await connections(fastOnly)) > before) {
    assert.ok(performance.now() < closedBy, `the terminated workers' connections are still open:\n${await probe.client('LIST')}`)
    await new Promise((r) => setTimeout(r, 50))
  }
  return touched
}

// Only the workers load lockdog: the runtime goes down with the last of them
// (napi-rs shuts it down), and with it every connection but the fast path's,
// which this checks.
for (const fastPath of [true, false]) {
  test(`terminated workers stop renewing and close their fast connections, runtime gone (${fastPath ? 'fast path' : 'tokio path'})`, async () => {
    const touched = await terminatedWorkersLetGo(fastPath, 'w', { fastOnly: true })
    assert.ok(touched.length > 0, 'the workers held locks when terminated')
  })
}

// The main thread uses lockdog too: the runtime lives on, and a terminated
// worker's client is closed there (its locks released).
describe('with lockdog on the main thread', () => {
  let keeper
  before(async () => {
    loadLockdog()
    keeper = new LockClient({ url: server.url })
    // The keeper's own connections are up before the workers' are counted: its
    // JS thread's connection opens in the background after its first operation
    // (counted later, it would pass for a worker's left open).
    const deadline = performance.now() + 10000
    while (keeper.fastPath && !(await probe.client('LIST')).includes('name=lockdog-fast')) {
      assert.ok(performance.now() < deadline, "the keeper's fast connection did not open")
      await (await keeper.acquire('wt:warm', { ttl: 1000 })).release()
      await new Promise((r) => setTimeout(r, 20))
    }
  })
  after(() => keeper.close())
  for (const fastPath of [true, false]) {
    test(`terminated workers stop renewing and close their connections (${fastPath ? 'fast path' : 'tokio path'})`, async () => {
      const lock = await keeper.acquire('wt:keeper', { ttl: TTL })
      const touched = await terminatedWorkersLetGo(fastPath, 'm')
      assert.ok(touched.length > 0, 'the workers held locks when terminated')
      // The main thread's own lock is still renewed.
      assert.equal(lock.held, true)
      assert.ok((await probe.pttl('wt:keeper')) > 0)
      assert.equal(await lock.release(), true)
    })
  }

  for (const how of ['exit', 'throw']) {
    test(`workers that ${how === 'exit' ? 'call process.exit()' : 'die of an uncaught error'} stop renewing and close their connections`, async () => {
      const touched = await terminatedWorkersLetGo(true, how[0], { how })
      assert.ok(touched.length > 0, 'the workers held locks when they ended')
    })
  }
})
