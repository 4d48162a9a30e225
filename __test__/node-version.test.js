'use strict'

// A Node older than package.json engines (">= 22") gets one error from require('lockdog')
// and import 'lockdog': code ERR_NODE_UNSUPPORTED, naming the running version and the
// requirement, with no chain of loader causes. A missing binary on a supported Node gets
// NATIVE_ADDON_MISSING, also printed without the loader's nested causes. Runs a real old
// Node when this machine has one (LOCKDOG_OLD_NODE, /usr/bin/node, or `node` on PATH
// when it is older than 22), and simulates one (process.versions.node) everywhere.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const { ROOT } = require('./helpers')

const OLD = "Object.defineProperty(process.versions, 'node', { value: '20.20.2' });"
const REPORT = `
  try { require(process.env.LOCKDOG_ROOT); console.log(JSON.stringify({ loaded: true })) }
  catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message, cause: 'cause' in e, loadError: !!e.loadError })) }
`

function node(bin, args, env = {}) {
  return spawnSync(bin, args, {
    encoding: 'utf8',
    env: { ...process.env, LOCKDOG_ROOT: ROOT, ...env },
    timeout: 30000,
  })
}

function report(r) {
  assert.equal(r.status, 0, r.stdout + r.stderr)
  return JSON.parse(r.stdout.trim().split('\n').at(-1))
}

/** What an uncaught load error prints: one error, no nested causes. */
function assertOneError(printed, code) {
  // On a terminal Node colours what it prints of an uncaught error.
  const stderr = printed.replace(/\x1b\[[0-9;]*m/g, '')
  assert.match(stderr, new RegExp(`code: '${code}'`))
  assert.doesNotMatch(stderr, /\[cause\]|cause:|npm has a bug|wasm32-wasi|\.wasi\.cjs|Require stack/, stderr)
  assert.ok(stderr.split('\n').length < 40, `${stderr.split('\n').length} lines:\n${stderr}`)
}

function unsupported(out, version) {
  assert.equal(out.code, 'ERR_NODE_UNSUPPORTED')
  assert.ok(out.message.includes(`Node.js ${version}`), out.message)
  assert.ok(out.message.includes('22 or newer'), out.message)
  assert.equal(out.cause, false)
}

test('require on a Node older than 22 (simulated): ERR_NODE_UNSUPPORTED naming both versions', () => {
  unsupported(report(node(process.execPath, ['-e', OLD + REPORT])), 'v20.20.2')
  // Also when npm left the binary package out, as it does on an unsupported Node.
  const missing = node(process.execPath, ['-e', OLD + REPORT], { NAPI_RS_NATIVE_LIBRARY_PATH: '/nonexistent/lockdog.node' })
  unsupported(report(missing), 'v20.20.2')
})

test('an uncaught ERR_NODE_UNSUPPORTED prints one error, for require and for import', () => {
  const r = node(process.execPath, ['-e', `${OLD} require(process.env.LOCKDOG_ROOT)`])
  assert.equal(r.status, 1)
  assertOneError(r.stderr, 'ERR_NODE_UNSUPPORTED')
  const m = node(process.execPath, ['--input-type=module', '-e',
    `${OLD} await import(process.env.LOCKDOG_ROOT + '/index.mjs')`])
  assert.equal(m.status, 1)
  assertOneError(m.stderr, 'ERR_NODE_UNSUPPORTED')
})

test('Bun and Deno are not held to the Node version they report', () => {
  const out = report(node(process.execPath, ['-e',
    `${OLD} Object.defineProperty(process.versions, 'bun', { value: '1.4.5' });` + REPORT]))
  assert.deepEqual(out, { loaded: true })
})

test('a missing binary on a supported Node: NATIVE_ADDON_MISSING, printed without the loader causes', () => {
  const env = { NAPI_RS_NATIVE_LIBRARY_PATH: '/nonexistent/lockdog.node' }
  const out = report(node(process.execPath, ['-e', REPORT], env))
  assert.equal(out.code, 'NATIVE_ADDON_MISSING')
  assert.equal(out.cause, false)
  assert.equal(out.loadError, true, 'the loader error stays reachable as loadError')
  assert.match(out.message, /What failed:\n {2}- Cannot find module '\/nonexistent\/lockdog\.node'/)
  const r = node(process.execPath, ['-e', 'require(process.env.LOCKDOG_ROOT)'], env)
  assert.equal(r.status, 1)
  assertOneError(r.stderr, 'NATIVE_ADDON_MISSING')
})

function oldNodes() {
  const candidates = [process.env.LOCKDOG_OLD_NODE, '/usr/bin/node']
  const which = spawnSync('sh', ['-c', 'command -v node'], { encoding: 'utf8' })
  if (which.status === 0) candidates.push(which.stdout.trim())
  const found = new Map()
  for (const bin of candidates) {
    if (!bin || !fs.existsSync(bin)) continue
    const v = spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout?.trim()
    if (/^v\d+\./.test(v) && Number(v.slice(1).split('.')[0]) < 22) found.set(fs.realpathSync(bin), v)
  }
  return [...found]
}

const old = oldNodes()
test(`a real Node older than 22 (${old.map(([, v]) => v).join(', ') || 'none on this machine'})`,
  { skip: old.length ? false : 'no Node older than 22 here (set LOCKDOG_OLD_NODE)' }, () => {
    for (const [bin, version] of old) {
      unsupported(report(node(bin, ['-e', REPORT])), version)
      const r = node(bin, ['-e', 'require(process.env.LOCKDOG_ROOT)'])
      assert.equal(r.status, 1)
      assertOneError(r.stderr, 'ERR_NODE_UNSUPPORTED')
    }
  })
