'use strict'

// Measurements of this process and of a redis-server, taken around a measured window.

const fs = require('node:fs')
const { execFileSync } = require('node:child_process')

let ticksPerSec = 100
try {
  ticksPerSec = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
} catch {}

/** utime+stime in ms of /proc/<pid>[/task/<tid>]/stat. */
function procCpuMs(file) {
  try {
    const s = fs.readFileSync(file, 'utf8')
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ')
    // fields after "pid (comm) ": state is f[0]; utime is field 14 overall -> f[11], stime f[12]
    return ((Number(f[11]) + Number(f[12])) * 1000) / ticksPerSec
  } catch {
    return NaN
  }
}

/** CPU ms of this process's main thread (its tid equals the pid). Node 20 has no process.threadCpuUsage. */
function mainThreadCpuMs() {
  if (typeof process.threadCpuUsage === 'function') {
    const u = process.threadCpuUsage()
    return (u.user + u.system) / 1000
  }
  return procCpuMs(`/proc/self/task/${process.pid}/stat`)
}

function processCpuMs() {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

function threadCount() {
  try {
    return fs.readdirSync('/proc/self/task').length
  } catch {
    return NaN
  }
}

function parseInfo(text) {
  const out = {}
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':')
    if (i > 0 && line[0] !== '#') out[line.slice(0, i)] = line.slice(i + 1)
  }
  return out
}

/** total_commands_processed and the sum of commandstats calls (which also counts commands run inside Lua). */
async function redisCounters(redis) {
  const info = parseInfo(await redis.info('all'))
  let calls = 0
  const perCommand = {}
  for (const [k, v] of Object.entries(info)) {
    if (!k.startsWith('cmdstat_')) continue
    const m = /calls=(\d+)/.exec(v)
    if (m) {
      calls += Number(m[1])
      perCommand[k.slice(8)] = Number(m[1])
    }
  }
  return { total: Number(info.total_commands_processed), calls, perCommand }
}

/** Difference of two redisCounters snapshots, minus the INFO command of the first snapshot. */
function counterDelta(a, b) {
  const perCommand = {}
  for (const [k, v] of Object.entries(b.perCommand)) {
    const d = v - (a.perCommand[k] || 0) - (k === 'info' ? 1 : 0)
    if (d > 0) perCommand[k] = d
  }
  return { total: b.total - a.total - 1, calls: b.calls - a.calls - 1, perCommand }
}

/** The Redis server's CPU so far in µs (INFO cpu: used_cpu_user + used_cpu_sys, the whole server process), or NaN. */
async function redisCpuUs(redis) {
  const info = parseInfo(await redis.info('cpu'))
  return (Number(info.used_cpu_user) + Number(info.used_cpu_sys)) * 1e6
}

/**
 * Commands that the contenders' scripts run inside (INFO commandstats counts
 * them on their own as well as within the script's time): left out of the
 * command time when the window ran scripts, so that each µs counts once.
 */
const SCRIPT_INNER = new Set(['get', 'del', 'publish', 'pexpire', 'pttl', 'incr', 'incrby', 'time', 'exists', 'expire', 'unlink',
  'zadd', 'zrem', 'zscore', 'zcard', 'zcount', 'zrange', 'zrangebyscore', 'zremrangebyscore', 'hget', 'hset', 'hdel', 'hgetall'])
const SCRIPT_CALLS = new Set(['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro'])

/** The Redis server's command time so far in µs by command (INFO commandstats usec), INFO and CONFIG left out. */
async function redisCommandUs(redis) {
  const info = parseInfo(await redis.info('commandstats'))
  const out = {}
  for (const [k, v] of Object.entries(info)) {
    const m = /^cmdstat_([^|]+)/.exec(k)
    const usec = /usec=(\d+)/.exec(v)
    if (m && usec && m[1] !== 'info' && m[1] !== 'config') out[m[1]] = (out[m[1]] || 0) + Number(usec[1])
  }
  return out
}

/** The command time between two `redisCommandUs` snapshots: each script's own commands within its time, not twice. */
function commandUsDelta(a, b) {
  const d = Object.fromEntries(Object.entries(b).map(([k, v]) => [k, v - (a[k] || 0)]))
  const scripts = Object.keys(d).some((k) => SCRIPT_CALLS.has(k) && d[k] > 0)
  return Object.entries(d).reduce((sum, [k, v]) => sum + (scripts && SCRIPT_INNER.has(k) ? 0 : v), 0)
}

/**
 * Per-pair costs over a measured window: call at its start, then the returned
 * function with the pairs done. Client CPU (every thread of this process), the
 * JS thread's CPU and the Redis server's CPU, each per pair. (System calls are
 * left out: /proc/self/io counts read and write but not send and recv, which
 * the native sockets use; `strace -c -f` counts them all.)
 */
async function perPair(redis) {
  // (No server to ask, e.g. a Redlock run over several: its column stays empty.)
  const at = async () => ({
    cpu: processCpuMs(),
    js: mainThreadCpuMs(),
    redis: redis ? await redisCpuUs(redis) : NaN,
    commands: redis ? await redisCommandUs(redis) : null,
  })
  const a = await at()
  return async (pairs) => {
    const b = await at()
    return {
      cpuUsPerPair: ((b.cpu - a.cpu) * 1000) / pairs,
      jsUsPerPair: ((b.js - a.js) * 1000) / pairs,
      redisUsPerPair: (b.redis - a.redis) / pairs,
      redisCommandUsPerPair: a.commands && b.commands ? commandUsDelta(a.commands, b.commands) / pairs : NaN,
    }
  }
}

module.exports = { procCpuMs, mainThreadCpuMs, processCpuMs, threadCount, parseInfo, redisCounters, counterDelta, ticksPerSec, redisCpuUs, redisCommandUs, commandUsDelta, perPair }
