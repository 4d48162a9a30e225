'use strict'

// Fairness across processes: P processes × W waiters contend for one key for
// D seconds, each holding it for a C ms critical section, with and without
// `fair: true`. Reports per-waiter completions, Jain's fairness index over
// them, mean and worst wait (from asking to holding, once every process is
// running; start-up waits are reported apart), and Redis commands per acquired
// lock (INFO commandstats before and after, on a redis-server of its own;
// commands run inside scripts count too).
//
// `--kind semaphore` takes permits of a semaphore of `--limit` (default 2);
// `--kind rwlock` alternates readers and writers (waiter 0 of each process a
// writer, waiter 1 a reader, ...).
//
//   node bench/fair/run.js [--procs 4] [--waiters 4] [--seconds 5] [--warmup 1000] [--cs 2] [--mode both|fair|plain] [--kind lock|semaphore|rwlock] [--limit 2]

const path = require('node:path')
const { spawn } = require('node:child_process')
const { parseArgs } = require('node:util')
const Redis = require('ioredis')
const { startRedis } = require('../../scripts/local-redis')

const { values: o } = parseArgs({
  options: {
    procs: { type: 'string', default: '4' },
    waiters: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '5' },
    cs: { type: 'string', default: '2' },
    mode: { type: 'string', default: 'both' },
    'retry-delay': { type: 'string' },
    warmup: { type: 'string', default: '1000' },
    kind: { type: 'string', default: 'lock' },
    limit: { type: 'string', default: '2' },
  },
})

/** Total calls of every command, from INFO commandstats. */
async function commands(redis) {
  const info = await redis.info('commandstats')
  let n = 0
  for (const m of info.matchAll(/calls=(\d+)/g)) n += Number(m[1])
  return n
}

function child(url, fair, id) {
  const args = [path.join(__dirname, 'worker.js'), JSON.stringify({ url, fair, id, waiters: Number(o.waiters), seconds: Number(o.seconds), cs: Number(o.cs), kind: o.kind, limit: Number(o.limit), ...(o['retry-delay'] ? { retryDelay: Number(o['retry-delay']) } : {}) })]
  const p = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  p.stdout.on('data', (d) => { out += d })
  return new Promise((resolve, reject) => p.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`worker ${id} exited ${code}`)))))
}

async function run(server, fair) {
  const redis = new Redis({ host: '127.0.0.1', port: server.port })
  try {
    const before = await commands(redis)
    const results = await Promise.all(Array.from({ length: Number(o.procs) }, (_, i) => child(server.url, fair, i)))
    const after = await commands(redis)
    const perWaiter = results.flatMap((r) => r.waiters.map((w) => w.count))
    // Waits count from `warmup` ms after the last process's first acquisition:
    // a process's first acquisitions also pay for its start (connecting,
    // loading scripts, subscribing to release notices) while others boot.
    const firstOf = results.map((r) => Math.min(...r.waiters.flatMap((w) => w.at)))
    const steadyFrom = Math.max(...firstOf) + Number(o.warmup)
    const tagged = results.flatMap((r) => r.waiters.flatMap((w, wi) => w.waits.map((x, i) => ({ x, p: r.id, w: wi, i, asked: w.asked[i] }))))
    const waits = tagged.filter((t) => t.asked >= steadyFrom).map((t) => t.x)
    const startup = tagged.filter((t) => t.asked < steadyFrom).map((t) => t.x)
    // The longest time the key went without a new holder (a stall of the whole line).
    const at = results.flatMap((r) => r.waiters.flatMap((w) => w.at)).filter((t) => t >= steadyFrom).sort((a, b) => a - b)
    let maxGap = 0
    for (let i = 1; i < at.length; i++) maxGap = Math.max(maxGap, at[i] - at[i - 1])
    const top = tagged.filter((t) => t.asked >= steadyFrom).sort((a, b) => b.x - a.x).slice(0, 3).map((t) => `${Math.round(t.x)} ms (process ${t.p}, waiter ${t.w}, #${t.i})`)
    const locks = perWaiter.reduce((a, b) => a + b, 0)
    const sum = perWaiter.reduce((a, b) => a + b, 0)
    const sq = perWaiter.reduce((a, b) => a + b * b, 0)
    const mean = waits.reduce((a, b) => a + b, 0) / waits.length
    return {
      kind: o.kind,
      fair,
      perProcess: results.map((r) => r.waiters.reduce((a, w) => a + w.count, 0)),
      perWaiter,
      jain: Math.round(((sum * sum) / (perWaiter.length * sq)) * 1000) / 1000,
      meanWaitMs: Math.round(mean * 10) / 10,
      worstWaitMs: Math.round(Math.max(...waits) * 10) / 10,
      worstOverMean: Math.round((Math.max(...waits) / mean) * 100) / 100,
      waitsCounted: waits.length,
      worstStartupWaitMs: startup.length ? Math.round(Math.max(...startup) * 10) / 10 : null,
      top,
      longestGapBetweenHoldersMs: Math.round(maxGap * 10) / 10,
      locks,
      commandsPerLock: Math.round(((after - before) / locks) * 10) / 10,
      wokenPerLock: Math.round((results.reduce((a, r) => a + r.stats.woken, 0) / locks) * 100) / 100,
      attemptsPerLock: Math.round((results.reduce((a, r) => a + r.stats.contended, 0) / locks) * 100) / 100,
    }
  } finally {
    redis.disconnect()
  }
}

;(async () => {
  const server = await startRedis()
  try {
    const modes = o.mode === 'both' ? [false, true] : [o.mode === 'fair']
    for (const fair of modes) console.log(JSON.stringify(await run(server, fair)))
  } finally {
    await server.stop()
  }
})().catch((e) => {
  console.error(e)
  process.exit(1)
})
