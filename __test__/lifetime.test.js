'use strict'

// A LockClient is garbage-collected once closed (or dropped) and unreachable,
// and a dropped one neither keeps the process alive nor its connections open.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { serverAndClient, runWorker } = require('./helpers')

let server
let redis

serverAndClient({}, (s) => ({ server, redis } = s))

async function connectedClients() {
  const info = await redis.info('clients')
  return Number(/connected_clients:(\d+)/.exec(info)[1])
}

test('closed clients are garbage-collected (>= 90 % of 1,000)', { timeout: 120_000 }, async () => {
  const r = await runWorker('lifetime.js', [server.url, 'closed', 1000], { nodeArgs: ['--expose-gc'] }).exited
  assert.equal(r.code, 0, r.stderr)
  const out = r.lines.at(-1)
  assert.ok(out.collected >= 900, `collected ${out.collected} of ${out.created}`)
})

test('clients dropped without close() are collected and their connections closed; the process exits by itself', { timeout: 120_000 }, async () => {
  const before = await connectedClients()
  const t0 = performance.now()
  const run = runWorker('lifetime.js', [server.url, 'dropped', 300], { nodeArgs: ['--expose-gc'] })
  let timer
  const r = await Promise.race([run.exited, new Promise((resolve) => { timer = setTimeout(() => resolve(null), 60_000) })])
  clearTimeout(timer)
  if (!r) run.child.kill('SIGKILL')
  assert.ok(r, 'the worker exited by itself within 60 s (nothing kept its event loop alive)')
  assert.equal(r.code, 0, r.stderr)
  const out = r.lines.find((l) => l.collected !== undefined)
  assert.ok(out.collected >= 270, `collected ${out.collected} of ${out.created}`)
  // Measured in the worker after collection, while the process was still alive.
  const connectionsWhileAlive = out.connectedAfterGc
  assert.ok(connectionsWhileAlive - before <= 30, `connections left open after collection: ${connectionsWhileAlive - before} (of ${out.created})`)
  assert.ok(performance.now() - t0 < 60_000)
  // The worker ended without close() and without process.exit(): nothing kept it alive.
  assert.equal(out.exitBy, 'event loop empty')
})
