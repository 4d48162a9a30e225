'use strict'

const { spawn } = require('node:child_process')
const path = require('node:path')
const Redis = require('ioredis')
const { startRedis, waitFor, redisServerAvailable, freePort } = require('../../scripts/local-redis')

const ROOT = path.join(__dirname, '..', '..')

/**
 * An ioredis client for inspecting a test server (never used by lockdog itself).
 * Tests stop and kill their servers: a connection error is kept in `lastError`
 * (a command on it still rejects) rather than printed as an unhandled event.
 */
function inspector(server) {
  const r = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: false, maxRetriesPerRequest: 1 })
  r.lastError = null
  r.on('error', (e) => { r.lastError = e })
  return r
}

/**
 * Starts `node <script> ...args` from __test__/workers and collects its JSON lines.
 * Resolves { code, signal, lines, stderr } when it exits.
 */
function runWorker(script, args = [], { env = {}, onLine, nodeArgs = [] } = {}) {
  const child = spawn(process.execPath, [...nodeArgs, path.join(__dirname, '..', 'workers', script), ...args.map(String)], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const lines = []
  let stderr = ''
  let rest = ''
  child.stdout.on('data', (d) => {
    rest += d
    let i
    while ((i = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, i)
      rest = rest.slice(i + 1)
      if (!line.trim()) continue
      let msg
      try {
        msg = JSON.parse(line)
      } catch {
        msg = { text: line }
      }
      lines.push(msg)
      if (onLine) onLine(msg)
    }
  })
  child.stderr.on('data', (d) => { stderr += d })
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal, lines, stderr }))
  })
  return { child, lines, exited, stderr: () => stderr }
}

/**
 * The fixture most test files start from: a throwaway redis-server and an ioredis
 * inspector on it (`serverArgs`: extra redis-server arguments), and with `client` options
 * a LockClient too, set up in the file's (or describe block's) `before` and torn down in
 * its `after`, whatever the tests did.
 * `assign` receives { server, redis, locks, client } once they exist; `client(options)`
 * makes a further LockClient on the server (`defaults`, then `options` over them),
 * closed in the same `after`:
 *
 *   let server, redis, locks
 *   serverAndClient({ client: { ttl: 2000 } }, (s) => ({ server, redis, locks } = s))
 */
function serverAndClient({ client = null, defaults = {}, serverArgs = [] } = {}, assign = () => {}) {
  const { before, after } = require('node:test')
  const made = {}
  const clients = []
  made.client = (options = {}) => {
    const { LockClient } = require('../..')
    const c = new LockClient({ url: made.server.url, ...defaults, ...options })
    clients.push(c)
    return c
  }
  before(async () => {
    made.server = await startRedis(serverArgs)
    made.redis = inspector(made.server)
    if (client) {
      const { LockClient } = require('../..')
      made.locks = new LockClient({ url: made.server.url, ...client })
    }
    assign(made)
  })
  after(async () => {
    try {
      await Promise.all([made.locks, ...clients].map((c) => c?.close()))
    } finally {
      made.redis?.disconnect()
      await made.server?.stop()
    }
  })
  return made
}

/**
 * Scheduling delay measured while a test runs: how late this process's timers fired
 * (the event loop's delay, which on a busy machine includes waiting for a core).
 * Timing bounds add `lag.max()` (ms) to what they bound instead of a fixed guess.
 */
function loopLag() {
  const { monitorEventLoopDelay } = require('node:perf_hooks')
  const h = monitorEventLoopDelay({ resolution: 10 })
  h.enable()
  return {
    max: () => h.max / 1e6,
    stop: () => h.disable(),
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/**
 * Resolves when `signal` aborts, with the time it did; rejects when it has not
 * aborted within `timeout` ms (a loss never signalled fails the test that waits
 * for it, by name, instead of holding the file until the runner's own timeout).
 */
function aborted(signal, { timeout = 20000, what = 'the lock\'s signal to abort' } = {}) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return resolve(performance.now())
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', done)
      reject(new Error(`timed out after ${timeout} ms waiting for ${what}`))
    }, timeout)
    function done() {
      clearTimeout(timer)
      resolve(performance.now())
    }
    signal.addEventListener('abort', done, { once: true })
  })
}

/**
 * A LockClient made with the JS-loop fast path (`fast` true) or without it
 * (LOCKDOG_FAST_PATH=0, which a client reads when it is made); the variable is
 * put back as it was.
 */
/** A server's `INFO commandstats` as { command: { calls, failed } } (`redis`: an ioredis client). */
async function commandStats(redis) {
  const info = await redis.info('commandstats')
  const out = {}
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),.*failed_calls=(\d+)/gm)) {
    out[m[1]] = { calls: Number(m[2]), failed: Number(m[3]) }
  }
  return out
}

/** Script calls (EVAL and EVALSHA) a server has run, and the DELIFEQs that stand for the release script where the server has them. */
async function scriptCalls(redis) {
  const stats = await commandStats(redis)
  return (stats.eval?.calls ?? 0) + (stats.evalsha?.calls ?? 0) + (stats.delifeq?.calls ?? 0)
}

/**
 * Every command a server runs from now on (MONITOR), with where it came from ('lua' for a
 * script's own calls), and the lock operations among them: script calls, plain first attempts
 * (SET NX PX) and DELIFEQs, sent by clients (not from inside scripts). `stop()` ends it.
 */
async function commandLog(probe) {
  const seen = []
  const monitor = await probe.monitor()
  monitor.on('monitor', (time, args, source) => seen.push({ args: args.map(String), source }))
  const lockCalls = () => seen.filter((c) => c.source !== 'lua' && /^(eval|evalsha|set|delifeq)$/i.test(c.args[0])).length
  return { seen, lockCalls, stop: () => monitor.disconnect() }
}

function lockClient(fast, options) {
  const saved = process.env.LOCKDOG_FAST_PATH
  if (!fast) process.env.LOCKDOG_FAST_PATH = '0'
  try {
    return new (require('../..').LockClient)(options)
  } finally {
    if (saved === undefined) delete process.env.LOCKDOG_FAST_PATH
    else process.env.LOCKDOG_FAST_PATH = saved
  }
}

/** What `step` made the server run: calls per command, from commandstats (the probe's own INFO and CONFIG RESETSTAT left out). */
async function commandsOf(probe, step) {
  await probe.config('RESETSTAT')
  await step()
  const stats = await commandStats(probe)
  const lock = Object.entries(stats).filter(([cmd]) => !/^(info|config)\b/.test(cmd))
  return Object.fromEntries(lock.map(([cmd, s]) => [cmd, s.calls]))
}

/** What the server has of the commands that stand for scripts: `DELIFEQ` (Valkey 9.0), `SET … IFEQ` (Valkey 8.1). */
async function scriptFreeCommands(redis) {
  const m = /^valkey_version:(\d+)\.(\d+)/m.exec(await redis.info('server'))
  const v = m ? Number(m[1]) * 100 + Number(m[2]) : 0
  return { delIfEq: v >= 900, setIfEq: v >= 801 }
}

module.exports = { commandsOf, scriptFreeCommands, serverAndClient, lockClient, commandStats, scriptCalls, commandLog, loopLag, startRedis, waitFor, redisServerAvailable, freePort, inspector, runWorker, sleep, aborted, ROOT }
