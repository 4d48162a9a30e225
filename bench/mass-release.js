'use strict'

// A burst: N locks held, the server's script cache flushed, then a Promise.all of N
// release() calls. Prints how many resolved true, how long the burst took, and the
// process's RSS when the locks were held, right after the burst and after close().
//
//   node --expose-gc bench/mass-release.js [--locks 100000] [--rounds 1]
//   LOCKDOG_FAST_PATH=0 node --expose-gc bench/mass-release.js   (the runtime path)
//
// It starts its own redis-server on a free loopback port (scripts/local-redis).

const { parseArgs } = require('node:util')
const { startRedis } = require('../scripts/local-redis')
const { LockClient } = require('..')
const Redis = require('ioredis')

let args
try {
  args = parseArgs({ options: { locks: { type: 'string', default: '100000' }, rounds: { type: 'string', default: '1' } } }).values
} catch (e) {
  console.error(`${e.message}\nusage: node --expose-gc bench/mass-release.js [--locks N] [--rounds N]`)
  process.exit(64)
}
const N = Number(args.locks)
const rounds = Number(args.rounds)
if (!Number.isInteger(N) || N < 1 || !Number.isInteger(rounds) || rounds < 1) {
  console.error('--locks and --rounds take positive integers')
  process.exit(64)
}
const mb = () => Math.round(process.memoryUsage().rss / 1048576)
const settle = () => new Promise((resolve) => setTimeout(resolve, 1000))

async function round(server, probe) {
  const locks = new LockClient({ url: server.url })
  let held = []
  for (let i = 0; i < N; i += 5000) {
    const n = Math.min(5000, N - i)
    held.push(...await Promise.all(Array.from({ length: n }, (_, j) => locks.acquire(`mass:${i + j}`, { ttl: 120000 }))))
  }
  await probe.script('FLUSH')
  const rssHeld = mb()
  const t0 = performance.now()
  const results = await Promise.allSettled(held.map((l) => l.release()))
  const ms = Math.round(performance.now() - t0)
  const released = results.filter((r) => r.status === 'fulfilled' && r.value === true).length
  const codes = {}
  for (const r of results) if (r.status === 'rejected') codes[r.reason.code] = (codes[r.reason.code] || 0) + 1
  const rssBurst = mb()
  held = []
  await locks.close()
  globalThis.gc?.()
  await settle()
  console.log(JSON.stringify({
    path: locks.fastPath ? 'fast' : 'runtime',
    locks: N,
    released,
    rejected: codes,
    keysLeft: await probe.dbsize(),
    burstMs: ms,
    rssMB: { held: rssHeld, afterBurst: rssBurst, afterClose: mb() },
  }))
}

async function main() {
  const server = await startRedis()
  const probe = new Redis({ host: '127.0.0.1', port: server.port })
  try {
    for (let r = 0; r < rounds; r++) await round(server, probe)
  } finally {
    probe.disconnect()
    await server.stop()
  }
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
