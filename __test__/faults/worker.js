'use strict'

// One worker process of the fault suite. Config: a JSON object in argv[2].
// Every line on stdout is a JSON event stamped with process.hrtime.bigint()
// (CLOCK_MONOTONIC, shared by every process on the machine), so the checker
// can compare events of different processes exactly. stdout is a pipe, and
// pipe writes are synchronous on Linux: a SIGKILL loses no line written before.
//
// Events: start, attempt, acquire_ok, observe, write (sent), wrote (applied), skip, lost, release_sent,
// release_result, acquire_err, done. Stops on "stop" on stdin, on SIGTERM
// (gracefully: it stops believing, then closes the client, releasing what it holds),
// or when `duration`/`ops` run out.

const { LockClient } = require('lockdog')
const Redis = require('ioredis')

const cfg = JSON.parse(process.argv[2])
const W = cfg.id
const T = () => String(process.hrtime.bigint())
const out = (ev, o = {}) => process.stdout.write(`${JSON.stringify({ ev, w: W, t: T(), ...o })}\n`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

process.on('unhandledRejection', (e) => {
  out('fatal', { kind: 'unhandledRejection', msg: String(e && e.stack ? e.stack : e) })
  process.exit(3)
})
process.on('warning', (w) => out('warning', { msg: String(w && w.stack ? w.stack : w) }))

if (process.env.NAPI_RS_NATIVE_LIBRARY_PATH) {
  // The loader falls back to the normal addon if the override fails to load:
  // make sure the file asked for is the one mapped into this process.
  require('lockdog')
  const maps = require('node:fs').readFileSync('/proc/self/maps', 'utf8')
  if (!maps.includes(require('node:path').resolve(process.env.NAPI_RS_NATIVE_LIBRARY_PATH))) {
    out('fatal', { kind: 'override', msg: `NAPI_RS_NATIVE_LIBRARY_PATH=${process.env.NAPI_RS_NATIVE_LIBRARY_PATH} was not loaded` })
    process.exit(4)
  }
}

const locks = new LockClient({
  nodes: cfg.nodes,
  keyPrefix: cfg.keyPrefix || 'f:',
  connectTimeout: cfg.connectTimeout ?? 500,
  commandTimeout: cfg.commandTimeout ?? 500,
  ...(cfg.nodeTimeout ? { nodeTimeout: cfg.nodeTimeout } : {}),
  ...(cfg.fair ? { fair: true } : {}),
})
locks.on('error', () => {}) // node faults are expected here; losses come through signals
const data = new Redis({ host: '127.0.0.1', port: Number(new URL(cfg.data).port), maxRetriesPerRequest: 3 })

let stopping = false
let current = null // { lock, tok, k } while inside a critical section
const held = new Set()

function stopBelieving(why) {
  for (const c of held) {
    if (!c.ended) {
      c.ended = true
      out('release_sent', { k: c.k, tok: c.tok, why })
    }
  }
}

process.stdin.setEncoding('utf8')
process.stdin.on('data', (d) => {
  if (d.includes('stop')) stopping = true
})
// The harness is gone (killed from outside): stop too, rather than run on orphaned.
process.stdin.on('end', () => { stopping = true })
process.on('SIGTERM', async () => {
  out('sigterm')
  stopping = true
  stopBelieving('sigterm')
  try {
    await locks.close()
  } catch {}
  // QUIT answers after every command sent before it: a write already logged is applied.
  await data.quit().catch(() => data.disconnect())
  out('done', { via: 'sigterm' })
  process.exit(0)
})

/** Re-reads the lock's local validity; logs it; false when the worker must stop acting. */
function observe(c) {
  if (stopping && cfg.mode !== 'hold') return false
  if (c.ended || c.lock.signal.aborted) return false
  const r = c.lock.remaining
  const t = process.hrtime.bigint()
  if (!(r > 0)) return false
  out('observe', { k: c.k, tok: c.tok, deadline: String(t + BigInt(Math.ceil(r * 1e6))) })
  return true
}

function enter(lock, k, tA, extra = {}) {
  const t = process.hrtime.bigint()
  const r = lock.remaining
  const dlo = String(t + BigInt(Math.floor(r * 1e6))) // never later than the true deadline
  const c = { lock, k, tok: lock.token, ended: false }
  held.add(c)
  current = c
  out('acquire_ok', {
    k,
    tok: c.tok,
    tA,
    ttl: lock.ttl,
    attempts: lock.attempts,
    // local deadline = acquire time + lock.remaining, read after (never earlier than
    // the true one: the overlap check errs towards seeing overlaps) ...
    deadline: String(process.hrtime.bigint() + BigInt(Math.ceil(r * 1e6))),
    // ... and read before (never later: the validity bound errs towards passing).
    dlo,
    t0: String(t),
    ...extra,
  })
  lock.signal.addEventListener('abort', () => {
    out('lost', { k, tok: c.tok, code: lock.signal.reason && lock.signal.reason.code })
  }, { once: true })
  return c
}

function leave(c, why) {
  if (!c.ended) {
    c.ended = true
    out('release_sent', { k: c.k, tok: c.tok, why })
  }
  held.delete(c)
  if (current === c) current = null
}

function busy(ms) {
  const end = performance.now() + ms
  while (performance.now() < end) {} // the event loop is blocked: the scenario
}

/** The critical section: `writes` read-modify-write increments of the key's counter. */
async function critical(c) {
  if (cfg.blockMs) busy(cfg.blockMs)
  const writes = cfg.writes ?? 1
  for (let i = 0; i < writes; i++) {
    if (!observe(c)) {
      out('skip', { k: c.k, tok: c.tok })
      return
    }
    const v = Number((await data.get(`c:${c.k}`)) || 0)
    if (cfg.holdMs) await sleep(cfg.holdMs)
    else await new Promise((r) => setImmediate(r))
    // Act only while the lock is believed held, checked synchronously right before.
    if (!observe(c)) {
      out('skip', { k: c.k, tok: c.tok })
      return
    }
    out('write', { k: c.k, tok: c.tok, v: v + 1 })
    await data.set(`c:${c.k}`, v + 1)
    out('wrote', { k: c.k, tok: c.tok, v: v + 1 })
    if (cfg.gapMs) await sleep(cfg.gapMs)
  }
}

function options() {
  const o = {
    ttl: cfg.ttl,
    retryDelay: cfg.retryDelay ?? 20,
    retryJitter: cfg.retryJitter ?? 20,
    waitTimeout: cfg.waitTimeout ?? 5000,
  }
  if (cfg.retryCount !== undefined) o.retryCount = cfg.retryCount
  if (cfg.maxHold) o.maxHold = cfg.maxHold
  if (cfg.renewInterval) o.renewInterval = cfg.renewInterval
  return o
}

/** A semaphore holder's section: held `holdMs` while believed held (no counter: holders run side by side). */
async function holdPermit(c) {
  if (!observe(c)) return out('skip', { k: c.k, tok: c.tok })
  await sleep(cfg.holdMs ?? 5)
  if (!observe(c)) out('skip', { k: c.k, tok: c.tok })
}

/** How many readers a read-write lock admits; its writer counts as all of them (as in the core). */
const READERS = 10000

async function onePermit(k, tA) {
  let permits = 1 + Math.floor(Math.random() * (cfg.maxPermits ?? 1))
  let limit = cfg.limit
  let lock
  try {
    if (cfg.api === 'rwlock') {
      // A writer is checked as every permit: never beside a reader or another writer.
      const write = Math.random() < (cfg.writeShare ?? 0.3)
      limit = READERS
      permits = write ? READERS : 1
      const rw = locks.readWriteLock(k)
      lock = await (write ? rw.writeLock(options()) : rw.readLock(options()))
    } else {
      lock = await locks.semaphore(k, { limit }).acquire({ ...options(), permits })
    }
  } catch (e) {
    out('acquire_err', { k, code: e.code || String(e) })
    return false
  }
  const c = enter(lock, k, tA, { limit, permits })
  try {
    await holdPermit(c)
  } finally {
    leave(c, 'done')
    try {
      out('release_result', { k, tok: c.tok, r: await lock.release() })
    } catch (e) {
      out('release_result', { k, tok: c.tok, err: e.code || String(e) })
    }
  }
  return true
}

async function oneOp(k) {
  const tA = T()
  out('attempt', { k })
  if (cfg.api === 'semaphore' || cfg.api === 'rwlock') return onePermit(k, tA)
  if (cfg.api === 'acquire') {
    let lock
    try {
      lock = await locks.acquire(k, options())
    } catch (e) {
      out('acquire_err', { k, code: e.code || String(e) })
      return false
    }
    const c = enter(lock, k, tA)
    try {
      await critical(c)
    } finally {
      leave(c, 'done')
      try {
        const r = await lock.release()
        out('release_result', { k, tok: c.tok, r })
      } catch (e) {
        out('release_result', { k, tok: c.tok, err: e.code || String(e) })
      }
    }
    return true
  }
  let c = null
  let failedAcquire = false
  try {
    await locks.withLock(k, async (signal, lock) => {
      c = enter(lock, k, tA)
      try {
        await critical(c)
      } finally {
        leave(c, 'done')
      }
    }, options())
    out('release_result', { k, tok: c.tok, r: 'ok' })
  } catch (e) {
    if (!c) {
      failedAcquire = true
      out('acquire_err', { k, code: e.code || String(e) })
    } else out('release_result', { k, tok: c.tok, err: e.code || String(e) })
  }
  return !failedAcquire
}

async function loop() {
  const until = performance.now() + (cfg.duration ?? 3000)
  let n = 0
  while (!stopping && performance.now() < until && n < (cfg.ops ?? Infinity)) {
    const k = cfg.keys[Math.floor(Math.random() * cfg.keys.length)]
    const ok = await oneOp(k)
    n++
    if (!ok) await sleep(cfg.errorBackoff ?? 20)
    else if (cfg.pauseMs) await sleep(cfg.pauseMs)
  }
}

/** Scripted: one lock on keys[0], held `holdMs`, writing every `writeEvery` ms while believed held. */
async function hold() {
  const k = cfg.keys[0]
  const tA = T()
  out('attempt', { k })
  let lock
  try {
    lock = await locks.acquire(k, options())
  } catch (e) {
    out('acquire_err', { k, code: e.code || String(e) })
    return
  }
  const c = enter(lock, k, tA)
  if (cfg.blockMs) busy(cfg.blockMs)
  const until = performance.now() + (cfg.holdMs ?? 1000)
  while (performance.now() < until && !stopping) {
    if (!observe(c)) {
      out('skip', { k, tok: c.tok })
      break
    }
    const v = Number((await data.get(`c:${k}`)) || 0)
    if (!observe(c)) {
      out('skip', { k, tok: c.tok })
      break
    }
    out('write', { k, tok: c.tok, v: v + 1 })
    await data.set(`c:${k}`, v + 1)
    out('wrote', { k, tok: c.tok, v: v + 1 })
    await sleep(cfg.writeEvery ?? 20)
  }
  leave(c, 'done')
  try {
    out('release_result', { k, tok: c.tok, r: await lock.release() })
  } catch (e) {
    out('release_result', { k, tok: c.tok, err: e.code || String(e) })
  }
}

;(async () => {
  out('start', { pid: process.pid })
  if (cfg.startAfter) await sleep(cfg.startAfter)
  if (cfg.mode === 'hold') await hold()
  else await loop()
  await locks.close()
  data.disconnect()
  const stats = locks.stats()
  out('done', { stats })
  process.stdin.destroy()
})().catch((e) => {
  out('fatal', { kind: 'error', msg: String(e && e.stack ? e.stack : e) })
  process.exit(2)
})
