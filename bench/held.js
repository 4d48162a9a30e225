'use strict'

// Many locks held at once by one client: N locks taken (in batches of 10,000
// concurrent acquires), held for a while as the native watchdog renews them,
// then a Promise.all of N release() calls. Prints what a service at that scale
// needs to know: how long the acquisitions took, the locks lost while held
// (there should be none), the renewals the client counted against the renewal
// calls Redis ran, how many releases resolved true / false / rejected, the
// keys left behind, and the process's RSS per held lock and after close().
//
//   node --expose-gc bench/held.js [--locks 1000000] [--ttl 30000] [--hold 60000]
//
// It starts its own redis-server on a free loopback port (scripts/local-redis).

const { parseArgs } = require('node:util')
const { startRedis } = require('../scripts/local-redis')
const { LockClient } = require('..')
const Redis = require('ioredis')

const USAGE = 'usage: node --expose-gc bench/held.js [--locks N] [--ttl MS] [--hold MS]'
let args
try {
  args = parseArgs({
    options: {
      locks: { type: 'string', default: '1000000' },
      ttl: { type: 'string', default: '30000' },
      hold: { type: 'string', default: '60000' },
    },
  }).values
} catch (e) {
  console.error(`${e.message}\n${USAGE}`)
  process.exit(64)
}
const [N, ttl, hold] = [args.locks, args.ttl, args.hold].map(Number)
if (![N, ttl, hold].every((v) => Number.isInteger(v) && v > 0)) {
  console.error(`--locks, --ttl and --hold take positive integers\n${USAGE}`)
  process.exit(64)
}
const mb = (bytes) => Math.round(bytes / 1048576)
// RSS after a memory-reducing full collection (what V8 runs when idle or
// under memory pressure): a plain gc() leaves the pages V8 freed pooled and
// resident, which no lock holds.
const rss = () => {
  if (global.gc) global.gc({ type: 'major', execution: 'sync', flavor: 'last-resort' })
  return process.memoryUsage().rss
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Calls of the renewal script Redis ran (each renews up to a chunk of locks). */
async function renewCalls(probe) {
  const info = await probe.info('commandstats')
  const line = info.split('\n').find((l) => l.startsWith('cmdstat_evalsha:'))
  return line ? Number(/calls=(\d+)/.exec(line)[1]) : 0
}

async function main() {
  const server = await startRedis()
  const probe = new Redis(server.port, '127.0.0.1', { lazyConnect: true })
  const locks = new LockClient({ url: server.url })
  let lostEvents = 0
  locks.on('lost', () => lostEvents++)
  locks.on('error', () => {})
  try {
    await probe.connect()
    const before = rss()
    let t0 = performance.now()
    let held = []
    for (let i = 0; i < N; i += 10000) {
      const n = Math.min(10000, N - i)
      held.push(...await Promise.all(Array.from({ length: n }, (_, j) => locks.acquire(`held:${i + j}`, { ttl }))))
    }
    const acquireMs = performance.now() - t0
    const heldRss = rss()
    const calls0 = await renewCalls(probe)
    const renewed0 = locks.stats().renewed
    await sleep(hold)
    const renewed = locks.stats().renewed - renewed0
    const calls = (await renewCalls(probe)) - calls0
    const lostWhileHeld = locks.stats().lost
    t0 = performance.now()
    const results = await Promise.allSettled(held.map((l) => l.release()))
    const releaseMs = performance.now() - t0
    const released = results.filter((r) => r.status === 'fulfilled' && r.value === true).length
    const rejected = results.filter((r) => r.status === 'rejected')
    const left = await probe.dbsize()
    held = null
    await locks.close()
    // The locks are collected (their native state goes once JS let go of
    // them), then the freed memory is given back: measured once RSS stopped
    // falling (two readings 500 ms apart within 1 %), 10 s at most.
    const closedAt = performance.now()
    let closedRss = rss()
    for (let last = Infinity; closedRss < last * 0.99 && performance.now() - closedAt < 10_000;) {
      last = closedRss
      await sleep(500)
      closedRss = rss()
    }
    const settleMs = performance.now() - closedAt
    const took = heldRss - before
    console.log(`${N} locks, ttl ${ttl} ms, held ${hold} ms (Node ${process.version})`)
    console.log(`  acquired in ${(acquireMs / 1000).toFixed(1)} s; RSS ${mb(heldRss)} MB held, ${Math.round(took / N)} B a lock`)
    console.log(`  while held: ${lostWhileHeld} lost ('lost' events: ${lostEvents}); ${renewed} renewals counted, ${calls} renewal script calls on the server`)
    console.log(`  release of all: ${released} true, ${results.length - released - rejected.length} false, ${rejected.length} rejected${rejected.length ? ` (${rejected[0].reason.code}: ${rejected[0].reason.message})` : ''} in ${(releaseMs / 1000).toFixed(1)} s; ${left} keys left`)
    console.log(`  RSS after close(): ${mb(closedRss)} MB (${took > 0 ? Math.round((100 * (heldRss - closedRss)) / took) : 0} % of what the locks took given back; steady ${(settleMs / 1000).toFixed(1)} s after close)`)
  } finally {
    probe.disconnect()
    await locks.close().catch(() => {})
    await server.stop()
  }
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
