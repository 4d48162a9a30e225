'use strict'

// The differential harness: the same test body runs against the real `redlock`
// package and against `lockdog/redlock`, with the same ioredis clients on
// servers (and Redis Clusters) started here and stopped by PID.

const { execFile } = require('node:child_process')
const fs = require('node:fs')
const { promisify } = require('node:util')
const { describe, test, before, after } = require('node:test')
const Redis = require('ioredis')
const { startRedis, waitFor } = require('../../scripts/local-redis')

const execFileAsync = promisify(execFile)

function load(name, mod) {
  const Redlock = mod.default
  return { name, Redlock, Lock: mod.Lock, ExecutionError: mod.ExecutionError, ResourceLockedError: mod.ResourceLockedError }
}

/** Both implementations, the reference first. */
const SIDES = [
  load('redlock@5.0.0-beta.2', require('redlock')),
  load('lockdog/redlock', require('lockdog/redlock')),
]

// Every server this process started, so that no exit path leaves one behind.
const started = new Set()
function track(server) {
  started.add(server)
  return server
}
function killAll() {
  for (const s of started) {
    try {
      if (s.pid) process.kill(s.pid, 'SIGKILL')
    } catch {}
    fs.rmSync(s.dir, { recursive: true, force: true })
  }
}
process.once('exit', killAll)
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(sig, () => {
    killAll()
    process.kill(process.pid, sig)
  })
}

async function stop(servers) {
  await Promise.all(servers.map(async (s) => {
    await s.stop()
    started.delete(s)
  }))
}

/** `n` standalone servers. */
async function startServers(n) {
  return Promise.all(Array.from({ length: n }, async () => track(await startRedis())))
}

const CLUSTER_ARGS = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000']

/** A Redis Cluster of three masters (no replicas), created with `redis-cli --cluster create`. */
async function startCluster() {
  const servers = await Promise.all([0, 1, 2].map(async () => track(await startRedis(CLUSTER_ARGS))))
  try {
    await execFileAsync('redis-cli', ['--cluster', 'create', ...servers.map((s) => `127.0.0.1:${s.port}`),
      '--cluster-replicas', '0', '--cluster-yes'], { timeout: 30000 })
    const infos = () => Promise.all(servers.map((s) =>
      execFileAsync('redis-cli', ['-p', String(s.port), 'cluster', 'info'], { timeout: 5000 }).then((r) => r.stdout)))
    await waitFor(async () => (await infos()).every((i) => i.includes('cluster_state:ok')),
      { timeout: 30000, what: 'cluster_state:ok on every node' })
  } catch (e) {
    await stop(servers)
    throw e
  }
  return servers
}

/** An ioredis client as a test would make it (plain options). */
function client(server, options = {}) {
  const c = new Redis({ host: '127.0.0.1', port: server.port, ...options })
  c.on('error', () => {})
  return c
}

/** An ioredis Cluster client seeded with the cluster's first node. */
function clusterClient(servers) {
  const c = new Redis.Cluster([{ host: '127.0.0.1', port: servers[0].port }])
  c.on('error', () => {})
  return c
}

/** Deletes every key on a standalone server or on every master of a cluster. */
async function flush(servers) {
  await Promise.all(servers.map((s) => s.command('FLUSHALL')))
}

/** Stats of every attempt, awaited. */
function statsOf(attempts) {
  return Promise.all(attempts)
}

/**
 * Registers `body(side, t)` once per side under `describe(side.name)`. Every
 * test runs on both sides: a deliberate difference is a test of its own that
 * says so in its name and asserts each side's behaviour.
 */
function compat(suite, tests) {
  for (const side of SIDES) {
    describe(`${suite} [${side.name}]`, () => {
      for (const { name, body } of tests) test(name, (t) => body(side, t))
    })
  }
}

module.exports = {
  SIDES, compat, startServers, startCluster, stop, client, clusterClient, flush, statsOf, before, after, waitFor,
}
