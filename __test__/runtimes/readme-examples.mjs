// The README's examples, run as a user of another runtime would (Bun, Deno, or Node):
// `bun readme-examples.mjs`, `deno run -A readme-examples.mjs`, with REDIS_URL naming a
// server that scripts/test-runtimes.js started. Exits 0 when every check held; prints
// one line per check and the figures it measured. EXPECT_FAST_PATH=0/1 says which path
// the runtime's clients must report (client.fastPath). It runs on this checkout; with
// LOCKDOG_FROM=lockdog (scripts/test-package.js) on the lockdog a project installed from a
// registry, resolved from the folder this file was copied into.

import { createRequire } from 'node:module'
import { execFileSync } from 'node:child_process'

const require = createRequire(import.meta.url)
const from = process.env.LOCKDOG_FROM
const lockdog = await import(from ?? '../../index.mjs')
const { LockClient, withLock, LockError } = lockdog
const Redlock = require(from ? `${from}/redlock` : '../../redlock.js')

const runtime = globalThis.Bun ? `Bun ${globalThis.Bun.version}`
  : globalThis.Deno ? `Deno ${globalThis.Deno.version.deno}` : `Node ${process.version}`
const url = process.env.REDIS_URL
if (!url) throw new Error('REDIS_URL is not set')

let failed = 0
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`)
  if (!ok) failed++
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

// A watchdog that stops renewing cannot hide: a run that hangs is a failure too.
const guard = setTimeout(() => {
  console.log(`FAIL ${runtime}: still running after 60 s`)
  process.exit(1)
}, 60_000)

console.log(`${runtime} against ${url.replace(/\/\/[^@]*@/, '//')}`)
const locks = new LockClient({ url, keyPrefix: 'rt:' })
if (process.env.EXPECT_FAST_PATH) {
  check(locks.fastPath === (process.env.EXPECT_FAST_PATH === '1'), `client.fastPath is ${locks.fastPath}`)
}

// withLock: the module-level helper (REDIS_URL) and the client's.
const receipt = await withLock('order:1001:pay', async (signal) => {
  check(signal instanceof AbortSignal && !signal.aborted, 'withLock hands over a live signal')
  return 'charged'
})
check(receipt === 'charged', 'module-level withLock returns what fn returned')
const total = await locks.withLock('k', async (signal, lock) => {
  check(lock.held && lock.key === 'k', 'client.withLock holds the lock while fn runs')
  return 42
}, { ttl: 5_000 })
check(total === 42, 'client.withLock returns what fn returned')

// acquire / extend / release, timed per operation. The first round opens the connections.
const rounds = 200
const times = { acquire: [], extend: [], release: [] }
for (let i = 0; i <= rounds; i++) {
  let t = performance.now()
  const lock = await locks.acquire('loop', { ttl: 2_000 })
  const a = performance.now() - t
  t = performance.now()
  await lock.extend(2_000)
  const e = performance.now() - t
  t = performance.now()
  const released = await lock.release()
  const r = performance.now() - t
  if (!released) {
    check(false, `round ${i}: release returned false (lock lost)`)
    break
  }
  if (i === 0) continue
  times.acquire.push(a)
  times.extend.push(e)
  times.release.push(r)
}
for (const [op, xs] of Object.entries(times)) {
  const m = median(xs)
  check(xs.length === rounds && m < 10, `${op}: median ${m.toFixed(2)} ms over ${xs.length} rounds (< 10 ms)`)
}

// The native watchdog renews a short lock while JS waits; tryAcquire from another client fails.
const other = new LockClient({ url, keyPrefix: 'rt:' })
const renewed = await locks.acquire('renewed', { ttl: 600 })
const renewedBefore = locks.stats().renewed
await sleep(1_500)
check(renewed.held && renewed.status === 'held' && !renewed.signal.aborted, 'a 600 ms lock is still held after 1.5 s')
const renewals = locks.stats().renewed - renewedBefore
check(renewals >= 3 && renewed.remaining > 0, `the watchdog renewed it ${renewals} times (remaining ${renewed.remaining} ms)`)
check((await other.tryAcquire('renewed', { ttl: 1_000 })) === null, 'another client cannot take it')
// A blocked event loop: the watchdog runs on Rust threads, not on the JS loop.
const until = Date.now() + 1_200
while (Date.now() < until) { /* block the JS thread for 2 ttls */ }
await sleep(50)
check(renewed.held && (await other.tryAcquire('renewed', { ttl: 1_000 })) === null,
  'still held after the JS thread was blocked for 1.2 s')
check(await renewed.release(), 'the renewed lock releases')

// A waiter is woken by the release notice.
const held = await locks.acquire('handover', { ttl: 5_000 })
const waiting = other.acquire('handover', { ttl: 5_000, waitTimeout: 5_000 })
await sleep(100)
const t0 = performance.now()
await held.release()
const next = await waiting
check(next.held, `a waiter takes the lock ${(performance.now() - t0).toFixed(1)} ms after its release`)
await next.release()

// Loss is never silent: the key deleted under its holder aborts the signal.
const doomed = await locks.acquire('doomed', { ttl: 600 })
const lost = new Promise((resolve) => doomed.signal.addEventListener('abort', () => resolve(doomed.signal.reason)))
await locks.forceRelease('doomed')
const reason = await Promise.race([lost, sleep(5_000).then(() => null)])
check(reason instanceof LockError && reason.code === 'ERR_LOCK_LOST', `a lost lock aborts its signal (${reason?.code})`)

// A semaphore: at most `limit` holders.
const sem = locks.semaphore('pool', { limit: 2, ttl: 5_000 })
const p1 = await sem.acquire()
const p2 = await sem.acquire()
const p3 = await sem.tryAcquire()
check(p1.held && p2.held && p3 === null, 'a semaphore of 2 gives out 2 permits, not a third')
await p1.release()
const p4 = await sem.acquire({ waitTimeout: 2_000 })
check(p4.held, 'a released permit can be taken again')
await Promise.all([p2.release(), p4.release()])

// A read-write lock: readers together, the writer alone.
const doc = locks.readWriteLock('doc:42')
const [r1, r2] = await Promise.all([doc.readLock(), doc.readLock()])
check(r1.held && r2.held && (await doc.tryWriteLock()) === null, 'two readers at once hold off a writer')
await Promise.all([r1.release(), r2.release()])
const wrote = await doc.withWriteLock(async (signal) => !signal.aborted)
check(wrote, 'the writer gets in once the readers are gone')

// A fair lock, fencing tokens, and a multi-key lock.
const fair = new LockClient({ url, keyPrefix: 'rt:', fair: true })
const f1 = await fair.acquire('invoice:run', { ttl: 5_000 })
const f2p = fair.acquire('invoice:run', { ttl: 5_000, waitTimeout: 5_000 })
await sleep(50)
await f1.release()
const f2 = await f2p
check(f2.held, 'a fair lock is handed to its waiter')
await f2.release()
await fair.close()
const fenced = new LockClient({ url, keyPrefix: 'rt:', fencing: true })
const g1 = await fenced.acquire('invoice:fenced')
const fence1 = g1.fence
await g1.release()
const g2 = await fenced.acquire('invoice:fenced')
check(typeof fence1 === 'number' && g2.fence > fence1, `each holder gets a larger fence (${fence1} then ${g2.fence})`)
await g2.release()
await fenced.close()
const both = await locks.acquire(['invoice:1', 'invoice:2'], { ttl: 5_000 })
check(both.held && (await other.tryAcquire('invoice:2')) === null, 'a multi-key lock holds each of its keys')
await both.release()

// The redlock package's API, on the same server.
// ioredis is the test's own client (LOCKDOG_IOREDIS: its path when the project has none).
const Redis = require(process.env.LOCKDOG_IOREDIS ?? 'ioredis')
const redis = new Redis(url)
const redlock = new Redlock([redis])
const r = await redlock.acquire(['rt:redlock'], 2_000)
const extended = await r.extend(2_000)
await extended.release()
check(true, 'lockdog/redlock: acquire, extend, release')
await redlock.quit()
redis.disconnect()

// The CLI, run by this runtime.
if (process.env.LOCKDOG_CLI_RUNTIME) {
  const argv = JSON.parse(process.env.LOCKDOG_CLI_RUNTIME)
  const out = execFileSync(argv[0], [...argv.slice(1), 'exec', '--url', url, '--key', 'rt:cli', '--', 'echo', 'ran'],
    { encoding: 'utf8', timeout: 30_000 })
  check(out.trim() === 'ran', `lockdog exec runs its command (${JSON.stringify(out.trim())})`)
}

const s = locks.stats()
check(s.lost === 1 && s.held === 0, `stats: acquired ${s.acquired}, renewed ${s.renewed}, lost ${s.lost}, held ${s.held}`)
await Promise.all([locks.close(), other.close()])
clearTimeout(guard)
console.log(failed ? `${runtime}: ${failed} check(s) failed` : `${runtime}: all checks passed`)
process.exit(failed ? 1 : 0)
