'use strict'

const { spawn } = require('node:child_process')
const path = require('node:path')
const Redis = require('ioredis')
const { startRedis, waitFor, redisServerAvailable, freePort } = require('../../scripts/local-redis')

const ROOT = path.join(__dirname, '..', '..')

/** An ioredis client for inspecting a test server (never used by lockdog itself). */
function inspector(server) {
  return new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: false, maxRetriesPerRequest: 1 })
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

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Resolves when `signal` aborts, with the time it did. */
function aborted(signal) {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(performance.now())
    signal.addEventListener('abort', () => resolve(performance.now()), { once: true })
  })
}

module.exports = { startRedis, waitFor, redisServerAvailable, freePort, inspector, runWorker, sleep, aborted, ROOT }
