#!/usr/bin/env node
'use strict'

// lockdog benchmark: lockdog vs the hand-written ioredis lock, redlock, @sesamecare-oss/redlock,
// redis-semaphore and redlock-universal, with raw ioredis and redis-benchmark as the floor.
//
//   node bench/run.js                 full run (~8 min on 2 cores)
//   node bench/run.js --quick         ~1 min, fewer/shorter rounds (written to bench/results/quick/)
//   node bench/run.js --scenario 3    only scenario 3 (repeatable, or 1,3)
//   options: --rounds N, --only lockdog,floor, --addon auto|build|repo|FILE.node, --no-write
//
// Each (scenario, contender, round) runs in a fresh child process (worker.js); contenders run
// in shuffled order inside each round so machine drift spreads over all of them; the tables
// show medians across rounds. Every loop is bounded by count and time.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { fork, spawnSync } = require('node:child_process')

const BENCH = __dirname
const RESULTS = path.join(BENCH, 'results')

// ---------------------------------------------------------------- arguments
let args
try {
  args = require('./lib/args').benchArgs(process.argv.slice(2), RESULTS)
} catch (e) {
  console.error(`bench/run.js: ${e.message} (--help lists the options)`)
  process.exit(64)
}
if (args.help) {
  console.log(fs.readFileSync(__filename, 'utf8').split('\n').slice(3, 13).join('\n'))
  process.exit(0)
}
// Output piped into `head` and the like: a closed pipe ends the run cleanly.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e) => {
    if (e.code !== 'EPIPE') throw e
    cleanup().finally(() => process.exit(0))
  })
}

// ---------------------------------------------------------------- bench's own dependencies
function ensureDeps() {
  if (fs.existsSync(path.join(BENCH, 'node_modules', 'ioredis'))) return
  console.log('installing bench dependencies (npm ci --prefix bench) ...')
  const r = spawnSync('npm', ['ci', '--prefix', BENCH, '--no-audit', '--no-fund'], { stdio: 'inherit' })
  if (r.status !== 0) {
    console.log('npm ci failed; trying npm install')
    const r2 = spawnSync('npm', ['install', '--prefix', BENCH, '--no-audit', '--no-fund'], { stdio: 'inherit' })
    if (r2.status !== 0 && !fs.existsSync(path.join(BENCH, 'node_modules', 'ioredis'))) {
      throw new Error('could not install bench dependencies (ioredis is required)')
    }
  }
}
ensureDeps()

const { startRedis } = require('../scripts/local-redis')
const { prepareAddon } = require('./lib/addon')
const { median, shuffle } = require('./lib/stats')
const { contenders } = require('./contenders')
const { renderMarkdown, computeTargets } = require('./lib/report')

// ---------------------------------------------------------------- settings
const FULL = {
  rounds: 5,
  s1: { warmMs: 300, ms: 1200, max: 20000 },
  s2: { warmMs: 300, ms: 1200, max: 200000, workers: 64 },
  s3: { warmMs: 200, ms: 2000, workers: 16, holdMs: 1 },
  s6: { warmMs: 200, ms: 2000, workers: 16, holdMs: 1 },
  s4: { warmMs: 150, ms: 700, max: 20000 },
  s5: { locks: 10000, holdMs: 10000, concurrency: 64 },
  s5rounds: 1,
  redisBenchmarkN: 20000,
}
const QUICK = {
  rounds: 2,
  s1: { warmMs: 100, ms: 300, max: 5000 },
  s2: { warmMs: 100, ms: 300, max: 50000, workers: 64 },
  s3: { warmMs: 100, ms: 600, workers: 16, holdMs: 1 },
  s6: { warmMs: 100, ms: 600, workers: 16, holdMs: 1 },
  s4: { warmMs: 60, ms: 200, max: 5000 },
  s5: { locks: 2000, holdMs: 3000, concurrency: 64 },
  s5rounds: 1,
  redisBenchmarkN: 5000,
}
const P = { ...(args.quick ? QUICK : FULL) }
if (args.rounds) P.rounds = args.rounds
const TTL = 30000
const RENEW_TTL = 3000
/** The same polling settings for every library in contention scenario 3. */
const WAIT = { retryDelay: 10, retryJitter: 10, waitTimeout: 10000 }
/** Scenario 6: the same contention, each library at its own default wait settings. */
const DEFAULTS = { defaults: true }
const NODE_COUNTS = [1, 3, 5]

// ---------------------------------------------------------------- processes we started
const children = new Set()
let servers = []
let addon = null
async function cleanup() {
  for (const ch of children) {
    try {
      process.kill(ch.pid, 'SIGKILL')
    } catch {}
  }
  await Promise.all(servers.map((s) => s.stop().catch(() => {})))
  servers = []
  if (addon) addon.cleanup()
}
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, () => {
    console.log(`\n${sig}: stopping redis-servers and workers`)
    cleanup().finally(() => process.exit(130))
  })
}

function runWorker(job) {
  return new Promise((resolve) => {
    const ch = fork(path.join(BENCH, 'worker.js'), [], { execArgv: ['--expose-gc'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    children.add(ch)
    let settled = false
    const done = (msg) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      children.delete(ch)
      resolve(msg)
    }
    // hard bound on top of the worker's own: a hung child is killed by its pid
    const timer = setTimeout(() => {
      try {
        process.kill(ch.pid, 'SIGKILL')
      } catch {}
      done({ error: `worker killed after ${job.timeoutMs + 5000} ms` })
    }, job.timeoutMs + 5000)
    ch.once('message', done)
    ch.once('exit', (code) => done({ error: `worker exited with code ${code} before reporting` }))
    ch.send(job)
  })
}

function redisBenchmark(port, n) {
  const r = spawnSync('redis-benchmark', ['-h', '127.0.0.1', '-p', String(port), '-c', '1', '-n', String(n), '-t', 'set', '--csv'], {
    encoding: 'utf8',
    timeout: 60000,
  })
  if (r.status !== 0) return { error: (r.stderr || r.error || 'redis-benchmark failed').toString() }
  const lines = r.stdout.trim().split('\n')
  const head = lines[0].replace(/"/g, '').split(',')
  const row = lines.find((l) => l.startsWith('"SET"')).replace(/"/g, '').split(',')
  const get = (name) => Number(row[head.indexOf(name)])
  return {
    opsPerSec: get('rps'),
    meanUs: 1e6 / get('rps'),
    p50Us: get('p50_latency_ms') * 1000,
    p99Us: get('p99_latency_ms') * 1000,
  }
}

// ---------------------------------------------------------------- machine
function machineInfo(redisVersion) {
  const cpus = os.cpus()
  return {
    cpuModel: cpus[0] ? cpus[0].model : 'unknown',
    cores: cpus.length,
    memGB: +(os.totalmem() / 2 ** 30).toFixed(1),
    os: `${os.type()} ${os.release()}`,
    node: process.version,
    redis: redisVersion,
    date: new Date().toISOString(),
    command: ['node', ...process.argv.slice(1).map((p, i) => (i === 0 ? path.relative(process.cwd(), p) || p : p))].join(' '),
    loadavgAtStart: os.loadavg().map((x) => +x.toFixed(2)),
  }
}

// ---------------------------------------------------------------- aggregation
function aggregate(rounds) {
  // rounds: array of result objects (possibly nested one level, e.g. {1:{..},3:{..}})
  const ok = rounds.filter(Boolean)
  if (ok.length === 0) return null
  const out = {}
  for (const k of Object.keys(ok[0])) {
    const vals = ok.map((r) => r[k])
    if (typeof vals[0] === 'number') out[k] = median(vals)
    else if (vals[0] && typeof vals[0] === 'object' && !Array.isArray(vals[0]) && k !== 'commands') out[k] = aggregate(vals)
    else if (k === 'commands') {
      out[k] = {}
      for (const name of new Set(vals.flatMap((v) => Object.keys(v || {})))) out[k][name] = median(vals.map((v) => (v && v[name]) || 0))
    }
  }
  out.rounds = ok.length
  return out
}

// ---------------------------------------------------------------- main
async function main() {
  const t0 = Date.now()
  const log = (...m) => console.log(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s]`, ...m)

  addon = prepareAddon({ mode: args.addon, log })
  log(`lockdog addon: ${addon.source}, ${(addon.bytes / 1e6).toFixed(1)} MB, commit ${addon.commit}${addon.dirty ? ' + uncommitted changes' : ''}`)

  servers = await Promise.all(Array.from({ length: Math.max(...NODE_COUNTS) }, () => startRedis()))
  const urls = servers.map((s) => s.url)
  const main = servers[0]
  const redisVersion = (/redis_version:(\S+)/.exec(await infoServer(main)) || [])[1] || 'unknown'
  const machine = machineInfo(redisVersion)
  log(`${machine.cpuModel}, ${machine.cores} cores, node ${machine.node}, redis ${redisVersion}; servers on ports ${servers.map((s) => s.port).join(', ')}`)

  // which contenders load at all
  const notes = []
  let names = Object.keys(contenders)
  if (args.only) names = names.filter((n) => args.only.includes(n))
  const usable = []
  for (const n of names) {
    const req = { lockdog: null, handwritten: 'ioredis', redlock: 'redlock', sesame: '@sesamecare-oss/redlock', semaphore: 'redis-semaphore', semaphoreRedlock: 'redis-semaphore', universal: 'redlock-universal', floor: 'ioredis' }[n]
    try {
      if (req) require.resolve(req, { paths: [BENCH] })
      usable.push(n)
    } catch (e) {
      notes.push(`${contenders[n].label}: left out, package not installed (${e.message.split('\n')[0]})`)
    }
  }

  const failures = {}
  const raw = {}
  const flush = () => Promise.all(servers.map((s) => s.command('FLUSHALL')))
  const jobBase = { urls, lockdogPath: addon.path, redisPid: main.pid }

  for (const scenario of args.scenarios) {
    const sk = `s${scenario}`
    raw[sk] = {}
    const list = usable.filter((n) => contenders[n].scenarios.includes(scenario))
    const rounds = scenario === 5 ? P.s5rounds : P.rounds
    const params = P[sk]
    log(`scenario ${scenario}: ${list.length} contenders × ${rounds} rounds`)
    for (let r = 0; r < rounds; r++) {
      const order = shuffle(scenario === 1 ? [...list, 'redis-benchmark'] : list)
      for (const name of order) {
        raw[sk][name] = raw[sk][name] || []
        if (name === 'redis-benchmark') {
          await flush()
          const res = redisBenchmark(main.port, P.redisBenchmarkN)
          if (res.error) notes.push(`redis-benchmark: ${res.error}`)
          else raw[sk][name].push(res)
          continue
        }
        if ((failures[`${sk}:${name}`] || 0) >= 2) continue
        await flush()
        const job = {
          ...jobBase,
          scenario,
          contender: name,
          params,
          ttl: scenario === 5 ? RENEW_TTL : TTL,
          wait: scenario === 3 ? WAIT : scenario === 6 ? DEFAULTS : null,
          nodeCounts: NODE_COUNTS,
          timeoutMs: scenario === 5 ? params.holdMs + 150000 : 90000,
        }
        const msg = await runWorker(job)
        if (msg.error) {
          failures[`${sk}:${name}`] = (failures[`${sk}:${name}`] || 0) + 1
          const note = `scenario ${scenario}, ${contenders[name].label}: run failed: ${msg.error.split('\n').slice(0, 2).join(' | ')}`
          notes.push(note)
          log(note)
          continue
        }
        raw[sk][name].push(msg.result)
        log(`  s${scenario} r${r + 1} ${name.padEnd(16)} ${brief(scenario, msg.result)}`)
      }
    }
  }

  const results = {}
  for (const [sk, byName] of Object.entries(raw)) {
    results[sk] = {}
    for (const [name, rounds] of Object.entries(byName)) {
      const agg = aggregate(rounds)
      if (agg) results[sk][name] = { label: name === 'redis-benchmark' ? 'floor: redis-benchmark -c 1 SET' : contenders[name].label, kind: name === 'redis-benchmark' || contenders[name].kind === 'floor' ? 'floor' : name === 'lockdog' ? 'lockdog' : 'peer', median: agg, rounds }
    }
  }

  const report = {
    machine,
    addon: { source: addon.source, sha256: addon.sha256, bytes: addon.bytes, commit: addon.commit, dirty: addon.dirty },
    settings: { ...P, ttl: TTL, renewTtl: RENEW_TTL, wait: WAIT, nodeCounts: NODE_COUNTS, quick: args.quick, scenarios: args.scenarios },
    notes,
    results,
    durationSec: Math.round((Date.now() - t0) / 1000),
  }
  report.targets = computeTargets(report)
  const md = renderMarkdown(report)
  console.log(`\n${md}`)
  if (args.write) {
    const dir = args.resultsDir
    fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(path.join(dir, 'latest.json'), `${JSON.stringify(report, null, 2)}\n`)
    fs.writeFileSync(path.join(dir, 'latest.md'), args.quick ? `> Quick run (--quick): fewer, shorter rounds; not the figures docs/performance.md quotes.\n\n${md}` : md)
    require('./chart').writeChart(path.join(dir, 'latest.json'), path.join(dir, 'chart.svg'))
    log(`wrote ${path.relative(path.join(BENCH, '..'), dir)}/latest.md, latest.json, chart.svg`)
  }
}

function infoServer(server) {
  // local-redis's command() returns the first line only; use ioredis for the full reply
  const Redis = require('ioredis')
  const r = new Redis(server.url)
  return r.info('server').finally(() => r.disconnect())
}

function brief(s, r) {
  const f = (x, d = 0) => (typeof x === 'number' ? x.toFixed(d) : '-')
  if (s === 1) return `${f(r.opsPerSec)} pairs/s, mean ${f(r.meanUs)} µs, p50 ${f(r.p50Us)} µs, p99 ${f(r.p99Us)} µs`
  if (s === 2) return `${f(r.opsPerSec)} pairs/s, p50 ${f(r.p50Us)} µs`
  if (s === 3 || s === 6) return `${f(r.csPerSec)} cs/s, hand-off p50 ${f(r.handoffP50Us)} µs, Jain ${f(r.jain, 2)}, ${f(r.cmdsPerLock, 1)} cmds/lock`
  if (s === 4) return NODE_COUNTS.map((n) => `${n}n ${f(r[n] && r[n].meanUs)} µs`).join(', ')
  if (s === 5) return `${r.held} held, ${r.alive} alive, ${f(r.cmdsPerSec)} cmds/s, main ${f(r.mainThreadCpuPct, 1)}% CPU, ${f(r.rssBytesPerLock)} B/lock RSS`
  return ''
}

main()
  .catch((e) => {
    console.error(e)
    process.exitCode = 1
  })
  .finally(() => cleanup())
