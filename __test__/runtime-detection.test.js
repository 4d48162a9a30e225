'use strict'

// Which path a client takes, told by client.fastPath: the fast path (libuv polls on
// Node's own loop) only where the runtime is Node; runtimes that load Node addons
// without Node's libuv loop behind them (Bun aborts on uv_poll_init_socket, Deno never
// runs the poll's callback) take the tokio path for everything. Their identity is
// simulated here in a child Node process (globalThis.Bun, globalThis.Deno,
// process.versions.bun / .deno set before lockdog loads); `npm run test:runtimes`
// runs the real Bun and Deno.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const { LockClient } = require('lockdog')
const { serverAndClient, waitFor, ROOT } = require('./helpers')

let server
let probe

serverAndClient({}, (s) => ({ server, redis: probe } = s))

async function fastConns() {
  return (await probe.client('LIST')).split('\n').filter((l) => l.includes('name=lockdog-fast')).length
}

test('a client on Node takes the fast path and says so', async () => {
  const locks = new LockClient({ url: server.url })
  try {
    assert.equal(locks.fastPath, true)
    await waitFor(async () => {
      await (await locks.acquire('rt:node', { ttl: 2000 })).release()
      return (await fastConns()) >= 1
    }, { what: 'a fast connection', timeout: 10000 })
  } finally {
    await locks.close()
  }
})

test('LOCKDOG_FAST_PATH=0: client.fastPath is false', async () => {
  process.env.LOCKDOG_FAST_PATH = '0'
  let locks
  try {
    locks = new LockClient({ url: server.url })
  } finally {
    delete process.env.LOCKDOG_FAST_PATH
  }
  try {
    assert.equal(locks.fastPath, false)
    await (await locks.acquire('rt:off', { ttl: 2000 })).release()
  } finally {
    await locks.close()
  }
})

// Sets up a runtime identity, then uses a client as a user would: 50 acquire/extend/release
// rounds and a lock renewed by the watchdog. Prints one JSON line.
const AS_OTHER_RUNTIME = `
  const [setup, url] = process.argv.slice(1)
  new Function(setup)()
  const { LockClient } = require(process.env.LOCKDOG_ROOT)
  ;(async () => {
    const locks = new LockClient({ url })
    const started = performance.now()
    for (let i = 0; i < 50; i++) {
      const lock = await locks.acquire('rt:other', { ttl: 2000 })
      await lock.extend(2000)
      if (!(await lock.release())) throw new Error('release returned false')
    }
    const ms = performance.now() - started
    const renewed = await locks.acquire('rt:renewed', { ttl: 900 })
    await new Promise((r) => setTimeout(r, 1500))
    const held = renewed.held && (await renewed.release())
    const Redis = require(require.resolve('ioredis', { paths: [process.env.LOCKDOG_ROOT] }))
    const probe = new Redis(url)
    const list = await probe.client('LIST')
    probe.disconnect()
    const fastConns = list.split(String.fromCharCode(10)).filter((l) => l.includes('name=lockdog-fast')).length
    console.log(JSON.stringify({ fastPath: locks.fastPath, ms, held, renewed: locks.stats().renewed, fastConns }))
    await locks.close()
  })().catch((e) => { console.log(JSON.stringify({ error: String(e && e.stack) })); process.exitCode = 1 })
`

const IDENTITIES = {
  'globalThis.Bun': "globalThis.Bun = { version: '1.4.5' }",
  'globalThis.Deno': "globalThis.Deno = { version: { deno: '2.9.6' } }",
  'process.versions.bun': "Object.defineProperty(process.versions, 'bun', { value: '1.4.5', enumerable: true })",
  'process.versions.deno': "Object.defineProperty(process.versions, 'deno', { value: '2.9.6', enumerable: true })",
}

for (const [name, setup] of Object.entries(IDENTITIES)) {
  test(`a runtime with ${name}: every operation takes the tokio path, fastPath is false`, async () => {
    const r = spawnSync(process.execPath, ['-e', AS_OTHER_RUNTIME, setup, server.url], {
      encoding: 'utf8',
      env: { ...process.env, LOCKDOG_ROOT: ROOT, LOCKDOG_FAST_PATH: '' },
      timeout: 60000,
    })
    assert.equal(r.status, 0, `child failed: ${r.stdout}${r.stderr}`)
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1))
    assert.equal(out.fastPath, false)
    assert.equal(out.held, true, 'the watchdog kept a 900 ms lock for 1.5 s')
    assert.ok(out.renewed >= 1, `renewals counted: ${out.renewed}`)
    assert.equal(out.fastConns, 0, 'no fast connection was opened')
  })
}
