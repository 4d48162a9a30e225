'use strict'

// One measured run: one contender, one scenario, in a fresh process (forked by run.js),
// so no contender inherits another's heap, JIT state or timers. Reports over IPC.

const { performance } = require('node:perf_hooks')
const { contenders, sleep } = require('./contenders')
const { sorted, pct, mean, jain } = require('./lib/stats')
const probe = require('./lib/probe')

const now = () => performance.now()

/** Sequential acquire+release pairs on one key, bounded by count and time. */
async function pairs(c, key, { warmMs, ms, max, counters }) {
  let end = now() + warmMs
  for (let i = 0; i < max && now() < end; i++) await c.release(await c.acquire(key))
  const lat = []
  const costs = await probe.perPair(counters)
  const t0 = now()
  end = t0 + ms
  while (lat.length < max && now() < end) {
    const s = now()
    await c.release(await c.acquire(key))
    lat.push(now() - s)
  }
  const elapsed = now() - t0
  const perPair = await costs(lat.length)
  const s = sorted(lat)
  return {
    ops: lat.length,
    opsPerSec: (lat.length * 1000) / elapsed,
    meanUs: (elapsed * 1000) / lat.length,
    p50Us: pct(s, 50) * 1000,
    p99Us: pct(s, 99) * 1000,
    ...perPair,
  }
}

async function scenario1(c, p) {
  return pairs(c, 'bench:seq', p)
}

/** `workers` loops, each on its own key, sharing one count and time budget. */
async function scenario2(c, { warmMs, ms, max, workers, counters }) {
  const run = async (budgetMs, record) => {
    const end = now() + budgetMs
    let started = 0
    const lat = []
    await Promise.all(
      Array.from({ length: workers }, async (_, w) => {
        const key = `bench:distinct:${w}`
        while (started < max && now() < end) {
          started++
          const s = now()
          await c.release(await c.acquire(key))
          if (record) lat.push(now() - s)
        }
      }),
    )
    return lat
  }
  await run(warmMs, false)
  const costs = await probe.perPair(counters)
  const t0 = now()
  const lat = await run(ms, true)
  const elapsed = now() - t0
  const perPair = await costs(lat.length)
  const s = sorted(lat)
  return { ops: lat.length, opsPerSec: (lat.length * 1000) / elapsed, p50Us: pct(s, 50) * 1000, p99Us: pct(s, 99) * 1000, ...perPair }
}

/** `workers` loops contending for one key, each holding it for `holdMs`. */
async function scenario3(c, { warmMs, ms, workers, holdMs, counters, redisPid }) {
  // warm the code paths without contention
  const wend = now() + warmMs
  while (now() < wend) await c.release(await c.acquire('bench:warm'))

  const key = 'bench:contended'
  const acqs = [] // { w, called, got, rel }
  const perWorker = new Array(workers).fill(0)
  let errors = 0
  const before = await probe.redisCounters(counters)
  const redisCpu0 = probe.procCpuMs(`/proc/${redisPid}/stat`)
  const t0 = now()
  const end = t0 + ms
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      while (now() < end) {
        const rec = { w, called: now(), got: 0, rel: 0 }
        let h
        try {
          h = await c.acquire(key)
        } catch {
          errors++
          continue
        }
        rec.got = now()
        await sleep(holdMs)
        rec.rel = now()
        acqs.push(rec)
        perWorker[w]++
        await c.release(h)
      }
    }),
  )
  const elapsed = now() - t0
  const after = await probe.redisCounters(counters)
  const redisCpu = probe.procCpuMs(`/proc/${redisPid}/stat`) - redisCpu0
  acqs.sort((a, b) => a.got - b.got)
  const handoff = []
  let overlaps = 0
  for (let i = 1; i < acqs.length; i++) {
    const d = acqs[i].got - acqs[i - 1].rel
    if (d < 0) overlaps++
    handoff.push(d)
  }
  const waits = acqs.map((a) => a.got - a.called)
  const hs = sorted(handoff)
  const delta = probe.counterDelta(before, after)
  const n = acqs.length
  return {
    criticalSections: n,
    csPerSec: (n * 1000) / elapsed,
    handoffP50Us: pct(hs, 50) * 1000,
    handoffP99Us: pct(hs, 99) * 1000,
    jain: jain(perWorker),
    maxMinRatio: Math.max(...perWorker) / Math.max(1, Math.min(...perWorker)),
    minCompletions: Math.min(...perWorker),
    maxCompletions: Math.max(...perWorker),
    worstWaitMs: Math.max(...waits),
    meanWaitMs: mean(waits),
    worstOverMeanWait: Math.max(...waits) / mean(waits),
    cmdsPerLock: delta.total / n,
    callsPerLock: delta.calls / n, // includes commands run inside Lua scripts
    commands: delta.perCommand,
    redisCpuPct: (redisCpu / elapsed) * 100,
    errors,
    overlaps, // must be 0: two holders at once would be a broken lock
  }
}

/** Sequential pairs on 1, 3 and 5 nodes (one client per node count). */
async function scenario4(c, p) {
  return pairs(c, 'bench:redlock', p)
}

/** Holds `locks` locks under the library's auto-renewal for `holdMs` and measures the steady state. */
async function scenario5(c, { locks, holdMs, concurrency, counters, redisPid, ttl }) {
  const gc = global.gc || (() => {})
  const settle = async () => {
    for (let i = 0; i < 3; i++) {
      gc()
      await sleep(50)
    }
  }
  // Memory is the marginal cost of holding: `locks` locks are taken (and held) first,
  // so start-up and the allocators' growth for an acquisition burst are paid before
  // mem0; the measured locks come on top; the first set is released before the hold.
  const warm = new Array(locks)
  {
    let w = 0
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (w < locks) {
          const i = w++
          warm[i] = await c.acquire(`bench:warm:${i}`)
        }
      }),
    )
  }
  await settle()
  const mem0 = process.memoryUsage()
  const handles = new Array(locks)
  let next = 0
  const tAcq = now()
  const acquireDeadline = tAcq + 120000
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < locks && now() < acquireDeadline) {
        const i = next++
        handles[i] = await c.acquire(`bench:held:${i}`)
      }
    }),
  )
  const acquireMs = now() - tAcq
  const held = handles.filter(Boolean).length
  await settle()
  const mem1 = process.memoryUsage()
  {
    let w = 0
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (w < locks) {
          const h = warm[w++]
          if (h) await c.release(h).catch(() => {})
        }
      }),
    )
  }
  await settle()

  const before = await probe.redisCounters(counters)
  const main0 = probe.mainThreadCpuMs()
  const proc0 = probe.processCpuMs()
  const redis0 = probe.procCpuMs(`/proc/${redisPid}/stat`)
  const elu0 = performance.eventLoopUtilization()
  const t0 = now()
  await sleep(holdMs)
  const elapsed = now() - t0
  const elu = performance.eventLoopUtilization(elu0)
  const mainMs = probe.mainThreadCpuMs() - main0
  const procMs = probe.processCpuMs() - proc0
  const redisMs = probe.procCpuMs(`/proc/${redisPid}/stat`) - redis0
  const after = await probe.redisCounters(counters)
  const alive = await counters.dbsize()
  const threads = probe.threadCount()

  const delta = probe.counterDelta(before, after)
  next = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < locks) {
        const h = handles[next++]
        if (h) await c.release(h).catch(() => {})
      }
    }),
  )
  return {
    held,
    alive, // keys still in Redis after the hold: held - alive locks were lost
    acquireMs,
    holdMs: elapsed,
    cmdsPerSec: (delta.total * 1000) / elapsed,
    callsPerSec: (delta.calls * 1000) / elapsed,
    expectedCmdsPerSec: held / (ttl / 3 / 1000),
    commands: delta.perCommand,
    mainThreadCpuPct: (mainMs / elapsed) * 100,
    processCpuPct: (procMs / elapsed) * 100,
    redisCpuPct: (redisMs / elapsed) * 100,
    elu: elu.utilization,
    threads,
    rssBytesPerLock: (mem1.rss - mem0.rss) / held,
    heapBytesPerLock: (mem1.heapUsed - mem0.heapUsed) / held,
    externalBytesPerLock: (mem1.external - mem0.external) / held,
  }
}

async function main(job) {
  const def = contenders[job.contender]
  const Redis = require('ioredis')
  const counters = new Redis(job.urls[0])
  await counters.ping()
  const out = {}
  try {
    if (job.scenario === 4) {
      for (const n of job.nodeCounts) {
        const c = await def.create({ urls: job.urls.slice(0, n), ttl: job.ttl, wait: null, renew: false, lockdogPath: job.lockdogPath })
        try {
          out[n] = await scenario4(c, job.params)
        } finally {
          await c.close()
        }
      }
      return out
    }
    const c = await def.create({
      urls: job.urls.slice(0, 1),
      ttl: job.ttl,
      wait: job.wait || null,
      renew: job.scenario === 5,
      lockdogPath: job.lockdogPath,
    })
    const p = { ...job.params, counters, redisPid: job.redisPid, ttl: job.ttl }
    try {
      if (job.scenario === 1) return await scenario1(c, p)
      if (job.scenario === 2) return await scenario2(c, p)
      if (job.scenario === 3 || job.scenario === 6) return await scenario3(c, p)
      if (job.scenario === 5) return await scenario5(c, p)
      throw new Error(`unknown scenario ${job.scenario}`)
    } finally {
      await c.close()
    }
  } finally {
    counters.disconnect()
  }
}

process.once('message', (job) => {
  const watchdog = setTimeout(() => {
    process.send({ error: `run exceeded ${job.timeoutMs} ms` }, () => process.exit(2))
  }, job.timeoutMs)
  watchdog.unref()
  main(job).then(
    (result) => process.send({ result }, () => process.exit(0)),
    (e) => process.send({ error: String((e && e.stack) || e) }, () => process.exit(1)),
  )
})
