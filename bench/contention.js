'use strict'

// Contention across processes: `--procs` processes × `--waiters` callers each
// take one key in turn (hold `--hold` ms, release), lockdog at its default wait
// settings. Reports Redis commands per acquired lock (INFO commandstats delta,
// commands run inside Lua included), script calls per lock, attempts per lock
// and the worst wait. `--fair` takes the key with `fair: true` (arrival order
// across processes).
//
//   node bench/contention.js [--procs 4] [--waiters 4] [--ms 5000] [--hold 1] [--fair] [--root DIR]
//
// `--root` is the lockdog package to measure (default: this repository).

const path = require('node:path')
const { fork } = require('node:child_process')
const { parseArgs } = require('node:util')

const { values: a } = parseArgs({
  options: {
    procs: { type: 'string', default: '4' },
    waiters: { type: 'string', default: '4' },
    ms: { type: 'string', default: '5000' },
    hold: { type: 'string', default: '1' },
    fair: { type: 'boolean', default: false },
    root: { type: 'string', default: path.join(__dirname, '..') },
    child: { type: 'string' },
  },
})

async function child() {
  const { LockClient } = require(path.resolve(a.root))
  const locks = new LockClient({ nodes: [a.child], fair: a.fair })
  const waiters = Number(a.waiters)
  const hold = Number(a.hold)
  await (await locks.acquire('bench:warm')).release()
  process.send({ ready: true })
  const start = await new Promise((resolve) => process.once('message', resolve))
  const end = start.end
  let acquired = 0
  let attempts = 0
  let worstWait = 0
  await Promise.all(Array.from({ length: waiters }, async () => {
    while (Date.now() < end) {
      const t = performance.now()
      let lock
      try {
        lock = await locks.acquire('bench:contended', { waitTimeout: Math.max(1, end - Date.now()) })
      } catch {
        continue
      }
      worstWait = Math.max(worstWait, performance.now() - t)
      acquired++
      attempts += lock.attempts
      await new Promise((resolve) => setTimeout(resolve, hold))
      await lock.release()
    }
  }))
  process.send({ acquired, attempts, worstWait })
  await locks.close()
}

async function main() {
  const { startRedis } = require('../scripts/local-redis')
  const { redisCounters, counterDelta } = require('./lib/probe')
  const Redis = require('ioredis')
  const server = await startRedis()
  const url = `redis://127.0.0.1:${server.port}`
  const redis = new Redis(url)
  const kids = []
  try {
    for (let i = 0; i < Number(a.procs); i++) {
      const ch = fork(__filename, ['--child', url, '--waiters', a.waiters, '--hold', a.hold, '--root', a.root, ...(a.fair ? ['--fair'] : [])])
      kids.push({ ch, ready: new Promise((resolve) => ch.once('message', resolve)) })
    }
    await Promise.all(kids.map((k) => k.ready))
    const results = kids.map((k) => new Promise((resolve) => k.ch.once('message', resolve)))
    const before = await redisCounters(redis)
    const end = Date.now() + Number(a.ms)
    for (const k of kids) k.ch.send({ end })
    const r = await Promise.all(results)
    const after = await redisCounters(redis)
    const d = counterDelta(before, after)
    const acquired = r.reduce((s, x) => s + x.acquired, 0)
    const attempts = r.reduce((s, x) => s + x.attempts, 0)
    const evals = (d.perCommand.evalsha || 0) + (d.perCommand.eval || 0)
    console.log(JSON.stringify({
      setting: `${a.procs} processes × ${a.waiters} waiters, hold ${a.hold} ms, ${a.ms} ms${a.fair ? ', fair' : ''}`,
      root: a.root,
      acquired,
      cmdsPerLock: +(d.calls / acquired).toFixed(2),
      evalsPerLock: +(evals / acquired).toFixed(2),
      attemptsPerLock: +(attempts / acquired).toFixed(2),
      worstWaitMs: +Math.max(...r.map((x) => x.worstWait)).toFixed(1),
      perCommand: d.perCommand,
      perCommandPerLock: Object.fromEntries(Object.entries(d.perCommand).map(([k, v]) => [k, +(v / acquired).toFixed(2)])),
    }))
  } finally {
    for (const k of kids) if (k.ch.exitCode === null) k.ch.kill('SIGKILL')
    redis.disconnect()
    await server.stop()
  }
}

if (a.child) child()
else main().catch((e) => { console.error(e); process.exitCode = 1 })
